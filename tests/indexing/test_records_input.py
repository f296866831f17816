"""Records input through `build-index` and `add`: records are bounded like text lines (an
over-long record is cut, with a warning that counts it), every skipped or odd record is
counted at the end of its file and named by its line under --verbose, a CSV quote left open
is an error naming its line, values that are not strings are written as JSON, and where one
file repeats an id its last record wins (also for `add --upsert`)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from cli_helpers import ENV, one_error_line, run, whole

from qtsearch.text.limits import MAX_RECORD_CHARS, MAX_SENTENCE_CHARS
from qtsearch.text.record_rows import LINE_BYTES

SENTENCES = ("Emma Woodhouse was handsome, clever, and rich.",
             "She had lived nearly twenty-one years in the world.",
             "Her father was a most affectionate, indulgent man.",
             "Mr. Knightley was a sensible man of about seven or eight and thirty.",
             "The wedding was very much like other weddings.")


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _build(capsys, corpus: Path, model: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return run(capsys, "build-index", str(corpus), "--model", str(model), "--out", str(out),
               "--index", "flat", "--device", "cpu", "-q", *extra)


def _rows(index: Path) -> list[tuple[str, str | None, str | None]]:
    conn = sqlite3.connect(index / "meta.sqlite")
    try:
        return conn.execute("SELECT text, doc_id, title FROM sentences ORDER BY id").fetchall()
    finally:
        conn.close()


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "WARNING" in line]


def test_skipped_records_are_counted_and_named_with_verbose(tiny_model, tmp_path, capsys):
    corpus = _jsonl(tmp_path / "later_no_text.jsonl", [
        {"_id": "1", "text": SENTENCES[0]},
        *({"_id": str(i), "summary": s} for i, s in enumerate(SENTENCES[1:4], 2)),
        {"_id": "5", "text": ""},
        {"_id": "6", "title": "Only a title", "text": "  "},
        {"_id": "7", "text": SENTENCES[4]},
    ])
    code, _, err = _build(capsys, corpus, tiny_model, tmp_path / "a")
    assert code == 0, err
    (warning,) = _warnings(err)
    assert "4 skipped (neither text nor title)" in warning, err
    assert "1 indexed by their title alone" in warning and "--verbose" in warning, err
    assert "later_no_text.jsonl:2" not in err  # lines only with --verbose
    assert [r[1] for r in _rows(tmp_path / "a")] == ["1", "6", "7"]

    code, _, err = _build(capsys, corpus, tiny_model, tmp_path / "b", "--verbose")
    assert code == 0, err
    for line in (2, 3, 4):
        assert f"later_no_text.jsonl:{line}: record skipped: no text field" in err, err
    assert "later_no_text.jsonl:5: record skipped: an empty text" in err
    assert "later_no_text.jsonl:6: record indexed by its title alone: an empty text" in err


#: Runs `qtsearch ARGV…` and prints the process's peak resident memory in kB.
PEAK = """
import resource, sys
from qtsearch.app.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    assert not e.code, e.code
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_an_over_long_record_is_cut_and_counted(tiny_model, tmp_path, capsys):
    # a 40 MB line: read in pieces, each string cut while it is read (held whole, it takes
    # over a GB)
    words = "word " * (8 << 20)  # no sentence end: one sentence of it all
    escaped = "café " * (MAX_RECORD_CHARS // 4)  # written as \u00e9 escapes
    corpus = _jsonl(tmp_path / "big.jsonl", [
        {"_id": "big", "title": "Big", "text": words},
        {"_id": "esc", "text": escaped + ". " + SENTENCES[0]},
        {"_id": "small", "text": SENTENCES[1]},
    ])
    assert corpus.stat().st_size > 40 * LINE_BYTES
    small = _jsonl(tmp_path / "small.jsonl", [{"_id": "small", "text": SENTENCES[1]}])
    peaks = {}
    for name, path in (("small", small), ("big", corpus)):  # the first warms the caches
        r = subprocess.run([sys.executable, "-c", PEAK, "build-index", str(path), "--model",
                            str(tiny_model), "--out", str(tmp_path / name), "--index",
                            "flat", "--device", "cpu", "-q", "-v"], capture_output=True,
                           text=True, env=ENV, timeout=600)
        assert r.returncode == 0, r.stderr
        peaks[name] = int(r.stdout.split()[-1])  # kB
    assert peaks["big"] < peaks["small"] + 150_000, peaks
    (warning,) = _warnings(r.stderr)
    assert "2 cut (texts at 1,000,000 characters" in warning, r.stderr
    assert ("big.jsonl:1: text cut to 1,000,000 characters; sentence cut to 10,000 characters"
            in r.stderr), r.stderr
    assert "big.jsonl:2: text cut to 1,000,000 characters" in r.stderr
    rows = _rows(tmp_path / "big")
    assert rows[0] == (f"Big. {words[:MAX_SENTENCE_CHARS]}", "big", "Big")
    esc = [text for text, doc_id, _ in rows if doc_id == "esc"]
    assert all(len(t) <= MAX_SENTENCE_CHARS for t in esc)
    # the cut text keeps its first characters whole, and no sentence after the cut
    assert esc[0].startswith("café café") and SENTENCES[0] not in " ".join(esc)
    assert rows[-1] == (SENTENCES[1], "small", None)
    whole(tmp_path / "big")


def test_a_csv_quote_left_open_names_its_line(tiny_model, tmp_path, capsys):
    corpus = tmp_path / "open.csv"
    corpus.write_text(f'id,text\n1,"{SENTENCES[0]}"\n2,"{SENTENCES[1]}\n3,{SENTENCES[2]}\n'
                      f"4,{SENTENCES[3]}\n", encoding="utf-8")
    code, _, err = _build(capsys, corpus, tiny_model, tmp_path / "a")
    assert code == 3, err
    line = one_error_line(err)
    assert "open.csv:3: a quoted field is never closed" in line, line
    assert not (tmp_path / "a").exists()
    corpus.write_text(f'id,text\n1,"{SENTENCES[0]}"\n2,"{SENTENCES[1]}"\n', encoding="utf-8")
    code, _, err = _build(capsys, corpus, tiny_model, tmp_path / "a")
    assert code == 0, err
    assert [r[0] for r in _rows(tmp_path / "a")] == list(SENTENCES[:2])
    # a quote that opens a field's text but does not end it is text, as it always was
    tsv = tmp_path / "quotes.tsv"
    tsv.write_text(f'id\ttext\n1\t"Emma," he said, "is rich."\n2\t{SENTENCES[1]}\n',
                   encoding="utf-8")
    code, _, err = _build(capsys, tsv, tiny_model, tmp_path / "b")
    assert code == 0, err
    assert [r[0] for r in _rows(tmp_path / "b")] == ['Emma, he said, "is rich."', SENTENCES[1]]


def test_values_that_are_not_strings_are_written_as_json(tiny_model, tmp_path, capsys):
    corpus = tmp_path / "values.jsonl"
    # json.dumps writes NaN as the bare NaN that Python's and pandas' writers put in JSON Lines
    _jsonl(corpus, [{"_id": 1, "title": 1984, "text": {"nested": "object text"}},
                    {"_id": 2, "title": "Tags", "text": ["one", 2, True]},
                    {"_id": 3, "title": None, "text": float("nan")},
                    {"_id": 4, "title": float("inf"), "text": 2.5}])
    code, _, err = _build(capsys, corpus, tiny_model, tmp_path / "a", "-v")
    assert code == 0, err
    assert "values.jsonl:3: record skipped: an empty text" in err, err
    assert _rows(tmp_path / "a") == [('1984. {"nested": "object text"}', "1", "1984"),
                                     ('Tags. ["one", 2, true]', "2", "Tags"),
                                     ("2.5", "4", None)]


def test_a_repeated_id_keeps_its_last_record(tiny_model, tmp_path, capsys):
    corpus = _jsonl(tmp_path / "repeat.jsonl", [
        {"_id": "a", "text": SENTENCES[0]}, {"_id": "b", "text": SENTENCES[1]},
        {"_id": "a", "text": SENTENCES[2]}, {"_id": "a", "text": SENTENCES[3]}])
    code, _, err = _build(capsys, corpus, tiny_model, tmp_path / "idx", "-v")
    assert code == 0, err
    (warning,) = _warnings(err)
    assert "2 replaced by a later record with the same id" in warning, err
    assert "repeat.jsonl:1: record 'a' replaced" in err and "repeat.jsonl:3:" in err
    assert _rows(tmp_path / "idx") == [(SENTENCES[1], "b", None), (SENTENCES[3], "a", None)]

    more = _jsonl(tmp_path / "more.jsonl", [
        {"_id": "b", "text": SENTENCES[4]}, {"_id": "c", "text": SENTENCES[0]},
        {"_id": "b", "text": SENTENCES[2]}])
    code, out, err = run(capsys, "add", str(tmp_path / "idx"), str(more), "--upsert", "-q",
                         "--device", "cpu")
    assert code == 0, err
    assert "added 2 sentences (replacing 1)" in out, out
    assert len(_warnings(err)) == 1 and "1 replaced" in err, err  # once, not once a reading
    assert sorted(_rows(tmp_path / "idx")) == sorted([
        (SENTENCES[3], "a", None), (SENTENCES[0], "c", None), (SENTENCES[2], "b", None)])
    whole(tmp_path / "idx")
