"""The reliability matrix: every command against messy inputs that must simply work and bad
inputs that must fail clearly (one `qtsearch: error:` line on stderr, the documented exit code,
no traceback, no half-written output, existing indexes byte-identical).

The inputs that must work run `python cli.py …` in fresh subprocesses. The failure rows are
many and each ends in well under a second of work, but a fresh interpreter costs ~3 s of
imports (torch, faiss) on this 2-core machine; so each failure row runs in its own process
forked from one warm interpreter that has imported qtsearch once (see `Forker`): a real
process with its own exit status, stdin, stdout and stderr, running the same
`qtsearch.app.cli.main` as cli.py. What other test files already cover (train's bad options,
build-index's missing/empty/binary corpus, the query errors) is not repeated here.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest
from cli_helpers import as_built
from hypothesis import given, settings
from hypothesis import strategies as st

from qtsearch.core.errors import InputError
from qtsearch.text.reader import MAX_SENTENCE_CHARS, read_sentences
from qtsearch.text.splitter import split_sentences
from qtsearch.text.tokenizer import tokenize

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "COLUMNS": "200"}
BOOK = "gutenberg/0003-austen-jane--emma.txt.gz"

# ---------------------------------------------------------------------------------------------
# Running the CLI


@dataclass
class Result:
    code: int
    out: str
    err: str

    def failed_cleanly(self, code: int, *words: str) -> None:
        """Exit `code`, exactly one stderr line `qtsearch: error: …` holding `words`."""
        lines = self.err.strip().splitlines()
        assert self.code == code, (self.code, self.err[-3000:])
        assert len(lines) == 1 and lines[0].startswith("qtsearch: error: "), self.err[-3000:]
        assert "Traceback" not in self.err
        for w in words:
            assert w in self.err, (w, self.err)


def cli(*argv: str | bytes, stdin: bytes | None = None, cwd: Path | None = None) -> Result:
    """`python cli.py argv` in a fresh process."""
    r = subprocess.run([sys.executable, str(REPO / "cli.py"), *argv], input=stdin,
                       capture_output=True, env=ENV, cwd=cwd, timeout=600)
    return Result(r.returncode, r.stdout.decode(errors="replace"),
                  r.stderr.decode(errors="replace"))


FORK_SERVER = r"""
import io, json, os, sys, traceback
# imports paid once
import qtsearch.app.cli, qtsearch.indexing.pipeline, qtsearch.search.searcher
import qtsearch.training.trainer
requests = sys.stdin.buffer
reply = os.fdopen(os.dup(1), "w")
while line := requests.readline():
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for fd, path, flags in ((0, req["stdin"], os.O_RDONLY),
                                    (1, req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                    (2, req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
                os.dup2(os.open(path, flags), fd)
            enc = dict(encoding="utf-8", errors="surrogateescape")
            sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False), **enc)
            sys.stdout = io.TextIOWrapper(open(1, "wb", closefd=False), **enc)
            sys.stderr = io.TextIOWrapper(open(2, "wb", closefd=False), **enc)
            os.chdir(req["cwd"])
            try:
                qtsearch.app.cli.main(req["argv"])
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (e.code is not None)
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
        finally:
            for f in (sys.stdout, sys.stderr):
                f.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    reply.write(json.dumps(os.waitstatus_to_exitcode(status)) + "\n")
    reply.flush()
"""


class Forker:
    """One warm interpreter that forks a fresh process per CLI run."""

    def __init__(self, workdir: Path):
        self.dir = workdir
        self.n = 0
        self.proc = subprocess.Popen([sys.executable, "-c", FORK_SERVER], env=ENV,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def __call__(self, *argv: str, stdin: bytes = b"", cwd: Path | None = None) -> Result:
        self.n += 1
        files = {k: self.dir / f"{self.n}.{k}" for k in ("stdin", "out", "err")}
        files["stdin"].write_bytes(stdin)
        req = {"argv": list(argv), "cwd": str(cwd or self.dir),
               **{k: str(v) for k, v in files.items()}}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        code = json.loads(self.proc.stdout.readline())
        return Result(code, files["out"].read_text(errors="replace"),
                      files["err"].read_text(errors="replace"))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    forker = Forker(tmp_path_factory.mktemp("fork"))
    yield forker
    forker.close()


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes: an index that must stay untouched."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------------------
# Inputs that must simply work

NON_LATIN = ["Ελληνικά κείμενα εδώ και εκεί.", "Русский текст тоже здесь есть.",
             "日本語の文もここにあります。", "النص العربي هنا أيضا.", "हिंदी पाठ भी यहाँ है।"]
#: Line numbers (1-based) of the messy lines in the corpus; the rest are clean Austen lines.
LINES = {"bom": 1, "invalid-utf8": 30, "nul": 31, "long-line": 32}
MESSY_KINDS = ["bom", "crlf", "non-latin", "invalid-utf8", "nul", "long-line"]


@dataclass
class Messy:
    path: Path
    good: list[str]  # the clean lines, in file order

    def expected(self, kind: str) -> str:
        """The sentence a reader must make of the messy line of `kind`."""
        return {"bom": self.good[0], "invalid-utf8": "Bad \ufffd\ufffd byte here.",
                "nul": "NUL in the middle.", "long-line": ("word " * 2000)[:MAX_SENTENCE_CHARS],
                }[kind]


@pytest.fixture(scope="module")
def messy(shared_data, tmp_path_factory) -> Messy:
    """A one-sentence-per-line corpus with CRLF ends, a BOM, non-Latin scripts (repeated, so
    a model trained on it knows their words), invalid UTF-8, a NUL byte and a 10 MB line."""
    sentences = read_sentences([shared_data / BOOK], split=True)
    good = [" ".join(s.text.split()) for s in itertools.islice(sentences, 400)]
    lines = [g.encode() for g in good[:29]]
    lines += [b"Bad \xff\xfe byte here.", b"NUL\x00 in the middle.", b"word " * 2_000_000]
    for i, g in enumerate(good[29:]):
        lines.append(g.encode())
        if i % 10 == 0:
            lines.append(NON_LATIN[(i // 10) % len(NON_LATIN)].encode())
    path = tmp_path_factory.mktemp("messy") / "messy.txt"
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n")
    return Messy(path, good)


def check_rows(kind: str, rows: dict[int, str], messy: Messy, err: str) -> None:
    """The stored sentences (line → text) of the messy corpus are right for `kind`, and the
    repair was announced with a warning naming the file and line."""
    texts = set(rows.values())
    if kind == "crlf":
        assert not any("\r" in t for t in texts)
        assert set(messy.good) <= texts
    elif kind == "non-latin":
        assert set(NON_LATIN) <= texts
    else:
        assert rows[LINES[kind]] == messy.expected(kind)
        assert not any("\ufeff" in t or "\x00" in t for t in texts)
    if kind in REPAIRS:
        assert warned(err, f"{messy.path}:{LINES[kind]}", REPAIRS[kind]), err


REPAIRS = {"invalid-utf8": "invalid UTF-8", "nul": "NUL bytes dropped", "long-line": "truncated"}


def warned(err: str, where: str, what: str) -> bool:
    """A warning line names `where` (file:line) and says `what`."""
    return any(f"{where}: " in line and what in line for line in err.splitlines())


@pytest.fixture(scope="module")
def trained(messy, tmp_path_factory):
    """`qtsearch train` on the messy corpus (a small model that knows its non-Latin words)."""
    out = tmp_path_factory.mktemp("messy_model") / "model"
    r = cli("train", str(messy.path), "--out", str(out), "--hidden", "16", "--word-dim", "16",
            "--vocab-size", "3000", "--batch-size", "64", "--max-steps", "3", "--val-every", "3",
            "--precision", "fp32", "-q")
    assert r.code == 0, r.err
    return out, r


@pytest.mark.parametrize("kind", MESSY_KINDS)
@pytest.mark.slow
def test_train_reads_messy_text(kind, trained, messy):
    out, r = trained
    words = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
    assert "Traceback" not in r.err
    if kind == "bom":
        assert messy.good[0].split()[0] in words and not any("\ufeff" in w for w in words)
    elif kind == "crlf":
        assert not any("\r" in w for w in words)
    elif kind == "non-latin":
        assert {"Ελληνικά", "Русский", "هنا"} <= set(words)
    else:
        assert not any("\x00" in w for w in words)
        assert warned(r.err, f"{messy.path}:{LINES[kind]}", REPAIRS[kind]), r.err


def _rows_by_line(folder: Path, source: Path) -> dict[int, str]:
    conn = sqlite3.connect(folder / "meta.sqlite")
    try:
        return dict(conn.execute("SELECT line, text FROM sentences WHERE source = ?",
                                 (str(source),)).fetchall())
    finally:
        conn.close()


@pytest.fixture(scope="module")
def messy_index(trained, messy, tmp_path_factory):
    """`qtsearch build-index` of the messy corpus with the model trained on it."""
    out = tmp_path_factory.mktemp("messy_index") / "index"
    r = cli("build-index", str(messy.path), "--model", str(trained[0]), "--out", str(out),
            "--index", "flat", "--precision", "fp32", "-q")
    assert r.code == 0, r.err
    return out, r


@pytest.mark.parametrize("kind", MESSY_KINDS)
@pytest.mark.slow
def test_build_index_reads_messy_text(kind, messy_index, messy):
    out, r = messy_index
    check_rows(kind, _rows_by_line(out, messy.path), messy, r.err)


@pytest.fixture(scope="module")
def one_sentence_index(trained, tmp_path_factory):
    folder = tmp_path_factory.mktemp("one")
    corpus = folder / "one.txt"
    corpus.write_text("Emma was very happy.\n", encoding="utf-8")
    out = folder / "index"
    r = cli("build-index", str(corpus), "--model", str(trained[0]), "--out", str(out), "-q")
    assert r.code == 0, r.err
    return out


@pytest.mark.slow
def test_one_sentence_corpus_indexes_and_answers(one_sentence_index, run):
    r = run("search", str(one_sentence_index), "Emma was happy.", "-k", "3", "--json")
    assert r.code == 0, r.err
    (answer,) = json.loads(r.out)
    assert [h["text"] for h in answer["hits"]] == ["Emma was very happy."]
    assert "larger than the index" in r.err  # k=3 of 1: said, not failed


@pytest.fixture(scope="module")
def added(one_sentence_index, messy, tmp_path_factory):
    """`qtsearch add` of the messy corpus to a copy of the one-sentence index."""
    folder = tmp_path_factory.mktemp("added") / "index"
    shutil.copytree(one_sentence_index, folder)
    r = cli("add", str(folder), str(messy.path), "-q")
    assert r.code == 0, r.err
    return folder, r


@pytest.mark.parametrize("kind", MESSY_KINDS)
@pytest.mark.slow
def test_add_reads_messy_text(kind, added, messy):
    folder, r = added
    check_rows(kind, _rows_by_line(folder, messy.path), messy, r.err)


#: Queries on standard input, as raw bytes, and the stored sentence each must find first.
STDIN_QUERIES = {
    "bom": (b"\xef\xbb\xbfNUL in the middle.\r\n", "NUL in the middle."),
    "crlf": (b"Bad \xef\xbf\xbd\xef\xbf\xbd byte here.\r\n", "Bad \ufffd\ufffd byte here."),
    "non-latin": (NON_LATIN[2].encode() + b"\n", NON_LATIN[2]),
    "invalid-utf8": (b"Bad \xff\xfe byte here.\n", "Bad \ufffd\ufffd byte here."),
    "nul": (b"NUL\x00 in the middle.\n", "NUL in the middle."),
    "long-line": (b"word " * 2_000_000 + b"\n", ("word " * 2000)[:MAX_SENTENCE_CHARS]),
}


@pytest.mark.parametrize("kind", MESSY_KINDS)
@pytest.mark.slow
def test_search_reads_messy_queries_from_stdin(kind, messy_index, run):
    raw, top = STDIN_QUERIES[kind]
    r = run("search", str(messy_index[0]), "-", "-k", "1", "--json", stdin=raw)
    assert r.code == 0, r.err
    assert json.loads(r.out)[0]["hits"][0]["text"] == top
    if kind in ("invalid-utf8", "nul", "long-line"):
        assert "<stdin>:1: " in r.err  # repaired with a warning naming the line


@pytest.mark.parametrize("kind", ["non-latin", "invalid-utf8"])
@pytest.mark.slow
def test_search_and_analogy_take_messy_arguments(kind, messy_index, run):
    if kind == "non-latin":
        a, b, c = NON_LATIN[:3]
    else:  # argv bytes that are not UTF-8 arrive as surrogate escapes
        a, b, c = (os.fsdecode(b"Bad \xff\xfe byte here."), "NUL in the middle.", NON_LATIN[0])
    r = run("search", str(messy_index[0]), a, "-k", "1", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)[0]["hits"][0]["text"] in (a, "Bad \ufffd\ufffd byte here.")
    r = run("analogy", str(messy_index[0]), a, b, c, "-k", "2", "--json")
    assert r.code == 0, r.err
    assert len(json.loads(r.out)[0]["hits"]) == 2


@pytest.mark.slow
def test_shell_takes_messy_lines(messy_index, tmp_path):
    env = {**ENV, "QTSEARCH_HISTORY": str(tmp_path / "hist"), "TERM": "dumb"}
    child = pexpect.spawn(str(Path(sys.executable).with_name("qtsearch")),
                          ["shell", str(messy_index[0]), "-k", "1"], env=env,
                          timeout=120, dimensions=(50, 200))
    child.expect("ready: ")
    child.expect_exact(b"qtsearch> ")
    for line, expect in ((NON_LATIN[0].encode(), "1 results in"),
                         (b"Bad \xff\xfe byte here.", "1 results in"),
                         (("word " * 600).encode(), "1 results in")):
        child.sendline(line)
        child.expect_exact(expect.encode())
        child.expect_exact(b"qtsearch> ")
        assert b"Traceback" not in child.before
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


@pytest.mark.slow
def test_eval_next_sentence_on_a_messy_book(trained, messy, shared_data, run):
    r = run("eval", str(trained[0]), "--tasks", "NextSent", "--books", str(messy.path),
            "--queries", "30", "--data", str(shared_data), "--json", "-q")
    assert r.code == 0, r.err
    assert "NextSent" in json.loads(r.out)["results"][trained[0].name]
    assert warned(r.err, f"{messy.path}:{LINES['invalid-utf8']}", "invalid UTF-8"), r.err


# ---------------------------------------------------------------------------------------------
# Inputs that must fail clearly

BAD_CORPUS = ["empty", "blank", "no-text-folder", "binary", "truncated-gz", "missing",
              "unreadable"]


def bad_corpus(kind: str, folder: Path) -> tuple[Path, str]:
    """A corpus path that cannot be read as text, and a word the error must contain."""
    p = folder / f"{kind}.txt"
    if kind == "empty":
        p.write_bytes(b"")
        return p, "empty"
    if kind == "blank":
        p.write_bytes(b"  \r\n\t\n\n")
        return p, "empty"
    if kind == "no-text-folder":
        p = folder / "pictures"
        p.mkdir()
        (p / "cat.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
        return p, "no text files"
    if kind == "binary":
        p.write_bytes(bytes(range(256)) * 64)
        return p, "binary"
    if kind == "truncated-gz":
        p = folder / "cut.txt.gz"
        p.write_bytes(gzip.compress(b"A sentence of text.\n" * 20_000)[:400])
        return p, "truncated"
    if kind == "missing":
        return folder / "nowhere.txt", "no such file"
    # unreadable: permissions stop a normal user; root reads anything, so a FIFO (no text
    # can be read from it, and a reader must not block on it) stands in there
    if os.geteuid() != 0:
        p.write_text("secret\n")
        p.chmod(0)
        return p, "permission denied"
    os.mkfifo(p)
    return p, "not a regular file"


#: Rows test_training.py and test_index_cli.py already run are left out of the matrix.
COVERED = {("train", "missing"), ("train", "binary"), ("train", "blank"),
           ("train", "truncated-gz"), ("build-index", "missing"), ("build-index", "binary"),
           ("build-index", "empty")}
CORPUS_ROWS = [(c, k) for c in ("train", "build-index", "add", "eval") for k in BAD_CORPUS
               if (c, k) not in COVERED]


@pytest.mark.parametrize(("command", "kind"), CORPUS_ROWS)
@pytest.mark.slow
def test_unreadable_corpus_fails_clearly(command, kind, tiny_model, one_sentence_index, run,
                                         shared_data, tmp_path):
    path, word = bad_corpus(kind, tmp_path)
    out = tmp_path / "out"
    index = tmp_path / "index"
    shutil.copytree(one_sentence_index, index)
    before = snapshot(index)
    argv = {"train": ["train", str(path), "--out", str(out), "--batch-size", "8"],
            "build-index": ["build-index", str(path), "--model", str(tiny_model),
                            "--out", str(out)],
            "add": ["add", str(index), str(path)],
            "eval": ["eval", str(tiny_model), "--tasks", "NextSent", "--books", str(path),
                     "--data", str(shared_data), "-q"]}[command]
    run(*argv).failed_cleanly(3, path.name, word)
    assert not (out / "weights.safetensors").exists() and not (out / "manifest.json").exists()
    assert not (tmp_path / "out.partial").exists() and not (tmp_path / "index.adding").exists()
    assert snapshot(index) == before


def test_training_corpus_smaller_than_a_batch_fails_clearly(run, tmp_path):
    corpus = tmp_path / "few.txt"
    corpus.write_text("One sentence.\nTwo sentences.\n\nThree.\n", encoding="utf-8")
    run("train", str(corpus), "--out", str(tmp_path / "m"), "--batch-size", "64").failed_cleanly(
        3, "2 × batch size")
    assert not (tmp_path / "m" / "weights.safetensors").exists()


UNWRITABLE = "{file}/out"  # a path under a regular file: not writable, even for root


@pytest.mark.parametrize("command", ["train", "build-index", "export", "eval"])
@pytest.mark.slow
def test_unwritable_output_fails_clearly(command, tiny_model, one_sentence_index, messy, run,
                                         shared_data, tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("a file, not a folder\n")
    target = UNWRITABLE.format(file=blocker)
    argv = {"train": ["train", str(messy.path), "--out", target],
            "build-index": ["build-index", str(messy.path), "--model", str(tiny_model),
                            "--out", target],
            "export": ["export", str(one_sentence_index), target + ".parquet"],
            "eval": ["eval", str(tiny_model), "--tasks", "STS16", "--limit", "10",
                     "--data", str(shared_data), "--markdown", target + ".md", "-q"]}[command]
    run(*argv).failed_cleanly(6, "file.txt")
    assert blocker.read_text() == "a file, not a folder\n"


def broken_model(kind: str, good: Path, folder: Path) -> Path:
    """A copy of a good model folder with one file missing or damaged."""
    m = folder / f"model-{kind}"
    shutil.copytree(good, m, ignore=shutil.ignore_patterns("cache", "checkpoint"))
    if kind == "no-weights":
        (m / "weights.safetensors").unlink()
    elif kind == "truncated-weights":
        data = (m / "weights.safetensors").read_bytes()
        (m / "weights.safetensors").write_bytes(data[: len(data) // 2])
    elif kind == "no-vocab":
        (m / "vocab.json").unlink()
    elif kind == "corrupt-vocab":
        (m / "vocab.json").write_bytes(b'["<pad>", "<unk>", "cut')
    elif kind == "no-config":
        (m / "config.json").unlink()
    elif kind == "weights-mismatch":  # a valid file of another architecture
        cfg = json.loads((m / "config.json").read_text())
        cfg["encoder"]["hidden"] += 1
        (m / "config.json").write_text(json.dumps(cfg))
    return m


MODEL_DAMAGE = ["no-weights", "truncated-weights", "no-vocab", "corrupt-vocab", "no-config",
                "weights-mismatch"]


@pytest.mark.parametrize("damage", MODEL_DAMAGE)
def test_damaged_model_fails_clearly(damage, tiny_model, messy, run, tmp_path):
    model = broken_model(damage, tiny_model, tmp_path)
    out = tmp_path / "index"
    run("build-index", str(messy.path), "--model", str(model), "--out", str(out)
        ).failed_cleanly(4, model.name)
    assert not out.exists() and not (tmp_path / "index.partial").exists()


@pytest.mark.parametrize("command", ["search", "analogy", "shell", "eval", "bench", "info"])
@pytest.mark.slow
def test_damaged_model_fails_clearly_in_every_command(command, tiny_model, one_sentence_index,
                                                      shared_data, run, tmp_path):
    model = broken_model("truncated-weights", tiny_model, tmp_path)
    q = "Emma was happy."
    argv = {"search": ["search", str(one_sentence_index), q, "--model", str(model)],
            "analogy": ["analogy", str(one_sentence_index), q, q, q, "--model", str(model)],
            "shell": ["shell", str(one_sentence_index), "--model", str(model)],
            "eval": ["eval", str(model), "--tasks", "STS16", "--data", str(shared_data), "-q"],
            "bench": ["bench", "analogy", "run", "--model", str(model), "--baselines", "none",
                      "--data", str(shared_data)],
            "info": ["info", str(model)]}[command]
    r = run(*argv)
    if command == "info":  # info reads only config and metrics: it describes the folder
        assert r.code == 0, r.err
        return
    r.failed_cleanly(4, "weights.safetensors")


def damaged_index(kind: str, good: Path, folder: Path, other_model: Path) -> Path:
    idx = folder / f"index-{kind}"
    shutil.copytree(good, idx)
    if kind == "counts-disagree":
        conn = sqlite3.connect(idx / "meta.sqlite")
        conn.execute("INSERT INTO sentences (id, text, source, line, doc, position) "
                     "VALUES (1, 'extra', 'x', 1, 0, 1)")
        conn.commit()
        conn.close()
        as_built(idx)  # recorded as it is: the counts disagree, no file is damaged
    elif kind == "no-faiss":
        (idx / "index.faiss").unlink()
    elif kind == "truncated-faiss":
        data = (idx / "index.faiss").read_bytes()
        (idx / "index.faiss").write_bytes(data[: len(data) // 2])
    elif kind == "no-sqlite":
        (idx / "meta.sqlite").unlink()
    elif kind == "corrupt-sqlite":
        (idx / "meta.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x07" * 300)
    elif kind == "corrupt-manifest":
        (idx / "manifest.json").write_text('{"format": "qtsearch-index", ')
    elif kind == "other-model":
        manifest = json.loads((idx / "manifest.json").read_text())
        manifest["model"]["path"] = str(other_model)
        (idx / "manifest.json").write_text(json.dumps(manifest))
    return idx


INDEX_DAMAGE = {"counts-disagree": (5, "rows"), "no-faiss": (5, "index.faiss"),
                "truncated-faiss": (5, "index.faiss"), "no-sqlite": (5, "meta.sqlite"),
                "corrupt-sqlite": (5, "meta.sqlite"), "corrupt-manifest": (5, "manifest"),
                "other-model": (4, "fingerprint")}


@pytest.mark.parametrize("damage", list(INDEX_DAMAGE))
@pytest.mark.parametrize("command", ["search", "analogy", "shell", "add"])
@pytest.mark.slow
def test_damaged_index_fails_clearly_and_stays_as_it_was(command, damage, one_sentence_index,
                                                         tiny_model, messy, run, tmp_path):
    """Counts that disagree, missing or corrupt files, an index recorded with another model:
    one line and exit 5 (4 for the model), and `add` changes nothing."""
    idx = damaged_index(damage, one_sentence_index, tmp_path, tiny_model)
    before = snapshot(idx)
    q = "Emma was happy."
    argv = {"search": ["search", str(idx), q], "analogy": ["analogy", str(idx), q, q, q],
            "shell": ["shell", str(idx)], "add": ["add", str(idx), str(messy.path)]}[command]
    code, word = INDEX_DAMAGE[damage]
    run(*argv).failed_cleanly(code, word)
    assert snapshot(idx) == before
    assert not (tmp_path / f"{idx.name}.adding").exists()


@pytest.mark.slow
def test_query_with_a_different_model_fails_clearly(one_sentence_index, tiny_model, run):
    """--model naming another model than the index's: refused, not silently wrong."""
    for argv in (["search", str(one_sentence_index), "Emma was happy.", "-m", str(tiny_model)],
                 ["shell", str(one_sentence_index), "-m", str(tiny_model)]):
        run(*argv).failed_cleanly(4, "fingerprint")


BAD_TUPLES = {"missing": None, "empty": b"", "binary": bytes(range(256)) * 64,
              "not-json": b'{"sentences": ["a", "b"\n'}


@pytest.mark.parametrize("kind", list(BAD_TUPLES))
def test_bench_bad_tuples_file_fails_clearly(kind, tiny_model, shared_data, run, tmp_path):
    path = tmp_path / "tuples.jsonl"
    if BAD_TUPLES[kind] is not None:
        path.write_bytes(BAD_TUPLES[kind])
    run("bench", "analogy", "run", "--model", str(tiny_model), "--baselines", "none",
        "--tuples", str(path), "--data", str(shared_data)).failed_cleanly(3, path.name)


# ---------------------------------------------------------------------------------------------
# Arbitrary input to the text layer (hypothesis): never a crash, only clean text or InputError


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=())))
def test_tokenizer_and_splitter_take_any_string_even_lone_surrogates(text: str) -> None:
    """Lone surrogates are what undecodable argv or stdin bytes become in Python."""
    for token in tokenize(text):
        assert token and not any(c.isspace() for c in token)
        token.encode("utf-8")
    for offset, sentence in split_sentences(text):
        assert 0 <= offset <= len(text) and sentence == sentence.strip() and sentence
        sentence.encode("utf-8")


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=3000), split=st.booleans())
def test_reader_takes_any_bytes(tmp_path_factory, data: bytes, split: bool) -> None:
    f = tmp_path_factory.mktemp("bytes") / "any.txt"
    f.write_bytes(data)
    try:
        sentences = list(read_sentences([f], split=split))
    except InputError:
        return  # empty, binary or a broken gzip: refused clearly
    for s in sentences:
        assert s.text and s.text == s.text.strip() and len(s.text) <= MAX_SENTENCE_CHARS
        assert "\x00" not in s.text
        s.text.encode("utf-8")  # valid Unicode: storable in SQLite and Parquet
        assert s.source == str(f) and s.line >= 1
