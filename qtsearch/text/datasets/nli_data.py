"""Natural-language-inference pairs (premise, hypothesis, label) from the common file layouts.

Three layouts are recognised per file, from its first non-blank line:
- SNLI / MultiNLI JSON lines (`.jsonl`): objects with `sentence1`, `sentence2`, `gold_label`;
- SNLI / MultiNLI `.txt`: tab-separated with a header naming `gold_label`, `sentence1`,
  `sentence2` (other columns are ignored);
- the KETM layout of ../shared/data/nli/ketm: `premise<TAB>hypothesis<TAB>…<TAB>label`, no
  header, label 0 = entailment, 1 = neutral, 2 = contradiction (checked against the original
  SICK files), extra middle columns (KETM's word definitions) ignored.

Pairs without a gold label ("-": annotators disagreed) or with an empty sentence are skipped, as
in the InferSent and SNLI baselines. Anything else malformed is an `InputError` naming the line.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from qtsearch.core.errors import InputError
from qtsearch.text.reader import _Lines, list_files

log = logging.getLogger("qtsearch")

#: Class ids used everywhere (the KETM files' own numbering).
LABELS = ("entailment", "neutral", "contradiction")
_LABEL_IDS = {name: i for i, name in enumerate(LABELS)} | {str(i): i for i in range(3)}
_NO_LABEL = ("-", "")


@dataclass(frozen=True)
class NLIPair:
    premise: str
    hypothesis: str
    label: int  # index into LABELS

    def sentences(self) -> tuple[str, str]:
        """Both sentences (what the evaluation-overlap filter checks, as for paraphrase pairs)."""
        return self.premise, self.hypothesis


def _label(raw: str, where: str) -> int | None:
    """The class id of a gold label, None for "no gold label"; anything else is an error."""
    key = raw.strip().lower()
    if key in _NO_LABEL:
        return None
    if key not in _LABEL_IDS:
        raise InputError(f"{where}: unknown label {raw.strip()[:40]!r} "
                         f"(expected {', '.join(LABELS)} or 0/1/2)")
    return _LABEL_IDS[key]


def _jsonl(lines: Iterator[tuple[int, str]], path: Path) -> Iterator[tuple[str, str, str, str]]:
    for lineno, text in lines:
        if not text.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(text)
            fields = row["sentence1"], row["sentence2"], row["gold_label"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise InputError(f"{where}: not an NLI JSON line with sentence1, sentence2 and "
                             f"gold_label ({type(e).__name__})") from e
        if not all(isinstance(f, str) for f in fields):
            raise InputError(f"{where}: sentence1, sentence2 and gold_label must be strings")
        yield *fields, where


def _with_header(
    header: str, lines: Iterator[tuple[int, str]], path: Path
) -> Iterator[tuple[str, str, str, str]]:
    names = header.split("\t")
    try:
        cols = [names.index(n) for n in ("sentence1", "sentence2", "gold_label")]
    except ValueError as e:
        raise InputError(f"{path}: header lacks sentence1, sentence2 or gold_label") from e
    need = max(cols) + 1
    for lineno, text in lines:
        if not text.strip():
            continue
        fields = text.split("\t")
        if len(fields) < need:
            raise InputError(f"{path}:{lineno}: {len(fields)} tab-separated fields, "
                             f"the header asks for {need}")
        yield fields[cols[0]], fields[cols[1]], fields[cols[2]], f"{path}:{lineno}"


def _ketm(first: tuple[int, str], lines: Iterator[tuple[int, str]],
          path: Path) -> Iterator[tuple[str, str, str, str]]:
    for lineno, text in _chain(first, lines):
        if not text.strip():
            continue
        fields = text.split("\t")
        if len(fields) < 3:
            raise InputError(f"{path}:{lineno}: expected premise<TAB>hypothesis<TAB>label, "
                             f"found {len(fields)} field(s)")
        yield fields[0], fields[1], fields[-1], f"{path}:{lineno}"


def _chain(first: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield first
    yield from rest


def read_nli_file(path: Path) -> list[NLIPair]:
    """All labelled pairs of one file, in file order (layout detected from its first line)."""
    lines = iter(_Lines(Path(path)))
    first = next(((n, t) for n, t in lines if t.strip()), None)
    if first is None:
        raise InputError(f"{path}: empty file (no NLI pairs)")
    head = first[1].lstrip()
    if head.startswith("{"):
        rows = _jsonl(_chain(first, lines), path)
    elif "gold_label" in head.split("\t"):
        rows = _with_header(first[1], lines, path)
    else:
        rows = _ketm(first, lines, path)
    pairs: list[NLIPair] = []
    skipped = 0
    for premise, hypothesis, raw_label, where in rows:
        label = _label(str(raw_label), where)
        premise, hypothesis = str(premise).strip(), str(hypothesis).strip()
        if label is None or not premise or not hypothesis:
            skipped += 1
            continue
        pairs.append(NLIPair(premise, hypothesis, label))
    if skipped:
        log.info("%s: %d pairs without a gold label or with an empty sentence skipped",
                 path, skipped)
    if not pairs:
        raise InputError(f"{path}: no labelled NLI pairs")
    return pairs


def read_nli(paths: Iterable[str | os.PathLike]) -> list[NLIPair]:
    """The labelled pairs of several files or folders, concatenated in order."""
    pairs: list[NLIPair] = []
    for path in list_files(paths):
        pairs.extend(read_nli_file(path))
    return pairs


def label_counts(pairs: Iterable[NLIPair]) -> dict[str, int]:
    counts = Counter(p.label for p in pairs)
    return {name: counts[i] for i, name in enumerate(LABELS)}
