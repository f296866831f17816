// The search page of `qtsearch serve`: plain JavaScript over the JSON API, no library.
// Text from the index is only ever set as textContent, never parsed as HTML.
// Paths are relative, so the page also works behind a proxy that serves it under a prefix.
"use strict";

const $ = (id) => document.getElementById(id);
const CONTEXT = 2;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
  };
  const response = await fetch(path, init);
  const data = await response.json();
  // a failed query among answered ones comes back as an array with its `error` field
  if (!response.ok && !Array.isArray(data)) throw new Error(data.error || response.statusText);
  return data;
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

function baseName(path) {
  return String(path).split(/[\\/]/).pop();
}

function origin(record) {
  if (record.title) return record.section ? `${record.title} › ${record.section}` : record.title;
  return `${baseName(record.source)}:${record.line}`;
}

function legsText(legs) {
  if (!legs) return "";
  return Object.entries(legs).map(([name, score]) => `${name} ${score.toFixed(3)}`).join(", ");
}

async function toggleContext(item, hit, button) {
  const open = item.querySelector(".context");
  if (open) {
    open.remove();
    button.setAttribute("aria-expanded", "false");
    return;
  }
  try {
    const records = await api(`sentences/${hit.id}?context=${CONTEXT}`);
    const list = el("ol", "context");
    list.setAttribute("aria-label", `passage around sentence ${hit.id}`);
    for (const record of records) {
      const line = el("li", record.id === hit.id ? "current" : "", record.text);
      list.append(line);
    }
    item.append(list);
    button.setAttribute("aria-expanded", "true");
  } catch (error) {
    showError(error.message);
  }
}

function renderHit(hit) {
  const item = el("li", "hit");
  item.dataset.id = hit.id;
  const main = el("button", "hit-main");
  main.type = "button";
  main.setAttribute("aria-expanded", "false");
  main.append(el("span", "score", hit.score.toFixed(3)), el("span", "text", hit.text));
  main.addEventListener("click", () => toggleContext(item, hit, main));
  const meta = el("div", "meta");
  meta.append(el("span", "source", origin(hit)));
  const legs = legsText(hit.legs);
  if (legs) meta.append(el("span", "legs", legs));
  const similar = el("button", "similar", "similar");
  similar.type = "button";
  similar.addEventListener("click", () => run(`similar to #${hit.id}`,
    () => api(`search?ids=true&q=${hit.id}&k=${k()}`)));
  meta.append(similar);
  item.append(main, meta);
  return item;
}

function render(title, answer) {
  $("results-title").textContent = title;
  $("results-title").hidden = false;
  $("note").textContent = answer.note || "";
  $("note").hidden = !answer.note;
  const hits = $("hits");
  hits.replaceChildren(...answer.hits.map(renderHit));
  if (!answer.hits.length && !answer.error) hits.append(el("li", "empty", "no match"));
  showError(answer.error);
}

async function run(title, request) {
  showError("");
  document.body.classList.add("busy");
  try {
    const answers = await request();
    render(title, answers[0]);
  } catch (error) {
    showError(error.message);
  } finally {
    document.body.classList.remove("busy");
  }
}

function k() {
  return Math.max(1, parseInt($("k").value, 10) || 10);
}

function mode() {
  const checked = document.querySelector("input[name=mode]:checked");
  return checked ? checked.value : "";
}

function search(event) {
  event.preventDefault();
  const q = $("q").value.trim();
  if (!q) return;
  const params = new URLSearchParams({q, k: k(), mode: mode(),
                                     by: $("by-doc").checked ? "doc" : "passage"});
  run(`${mode()}: ${q}`, () => api(`search?${params}`));
}

function analogy(event) {
  event.preventDefault();
  const [a, b, c] = ["a", "b", "c"].map((id) => $(id).value.trim());
  run(`${a} : ${b} :: ${c} : ?`, () => api("analogy", {a, b, c, k: k()}));
}

const INFO_FIELDS = [
  ["count", "sentences"], ["index_type", "index type"], ["index_key", "faiss index"],
  ["dim", "dimensions"], ["bm25", "BM25 files"], ["transform", "fitted vectors"],
  ["bytes_on_disk", "bytes on disk"], ["path", "folder"],
];

function describe(value) {
  if (typeof value === "number") return value.toLocaleString("en");
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (value && typeof value === "object") return value.spec || JSON.stringify(value);
  return String(value);
}

async function loadInfo() {
  try {
    const info = await api("info");
    const model = (info.model && (info.model.name || info.model.path)) || "?";
    // BM25 files, or the full-text table of an index built before them
    const lexical = info.bm25 || info.full_text;
    $("summary").textContent = `${info.count.toLocaleString("en")} sentences · ` +
      `${info.index_type} index · model ${model} · ` +
      (lexical ? "hybrid search" : "semantic search only");
    const list = $("info");
    for (const [key, label] of [...INFO_FIELDS, ["model", "model"]]) {
      if (!(key in info)) continue;
      const value = key === "model" ? model : describe(info[key]);
      list.append(el("dt", "", label), el("dd", "", value));
    }
    if (!lexical) {  // only vectors
      for (const input of document.querySelectorAll("input[name=mode]")) {
        input.disabled = input.value !== "semantic";
        input.checked = input.value === "semantic";
      }
    }
  } catch (error) {
    $("summary").textContent = "";
    showError(error.message);
  }
}

document.addEventListener("keydown", (event) => {
  const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName);
  if (event.key === "/" && !typing) {
    event.preventDefault();
    $("q").focus();
    $("q").select();
  } else if (event.key === "Escape") {
    for (const open of document.querySelectorAll(".context")) open.remove();
    for (const b of document.querySelectorAll(".hit-main")) b.setAttribute("aria-expanded", "false");
  }
});

$("search-form").addEventListener("submit", search);
$("analogy-form").addEventListener("submit", analogy);
loadInfo();
