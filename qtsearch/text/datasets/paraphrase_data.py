"""Paraphrase pairs (anchor, positive, optional hard negative) for contrastive training.

Readers, detected per file by its name:
- Multi30k / Flickr30k captions, `SPLIT.1.en[.gz]`: line i of SPLIT.1 … SPLIT.5 describes the
  same image; every two captions of an image make a pair (10 per image);
- COCO captions, `*.json[.gz]` (`annotations[]` with `image_id`, `caption`): every two captions
  of an image;
- NLI files: the CSV layout `premise,hypothesis,label` (`*.csv[.gz]`, fields may span lines,
  HTML markup is stripped) and every layout of `qtsearch.text.datasets.nli_data`. An entailed
  hypothesis is the premise's positive; a contradicted one of the same premise, when there is
  one, its hard negative. Neutral and `not_entailment` pairs are not paraphrases and are left out.

Evaluation sentences must never be trained on: `eval_sentences` gathers every field of every
data file under a folder (the STS, SICK and MSRP files of `sts/`), and `drop_overlap` removes each
pair that shares a sentence with them, compared after `normalise` (case, spacing, final
punctuation).
"""

from __future__ import annotations

import csv
import functools
import gzip
import io
import itertools
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol, TypeVar

import numpy as np

from qtsearch.core.errors import InputError
from qtsearch.text.datasets.nli_data import LABELS, read_nli_file
from qtsearch.text.reader import list_files

T = TypeVar("T")


class HasSentences(Protocol):
    def sentences(self) -> Iterable[str]: ...


P = TypeVar("P", bound=HasSentences)
MULTI30K = re.compile(r"^(?P<stem>.+)\.1\.en(?P<gz>\.gz)?$")
_TAG = re.compile(r"<[^>]{1,40}>")
#: Files under an evaluation folder that hold no sentences.
_NOT_DATA = ("readme", "licen", ".html")


@dataclass(frozen=True)
class Pair:
    anchor: str
    positive: str
    negative: str | None = None  # a hard negative: contradicts the anchor

    def sentences(self) -> tuple[str, ...]:
        return (self.anchor, self.positive) + ((self.negative,) if self.negative else ())


def normalise(sentence: str) -> str:
    """The form in which two sentences count as the same: lowercase, single spaces, no final
    punctuation ("A dog runs." and "a  dog runs" are one sentence)."""
    return " ".join(sentence.lower().split()).rstrip(" .!?")


def _open_text(path: Path) -> IO[str]:
    """A text stream of a plain or gzip file; unreadable files fail as one InputError line."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - wrapped and returned; the caller closes it
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror})") from e
    stream = gzip.GzipFile(fileobj=raw) if raw.read(2) == b"\x1f\x8b" else raw
    raw.seek(0)
    return io.TextIOWrapper(stream, encoding="utf-8-sig", errors="replace", newline="")


def _read_all(path: Path, read: Callable[[IO[str]], T]) -> T:
    try:
        with _open_text(path) as fh:
            return read(fh)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"{path}: corrupt or truncated file ({e})") from e


def _clean(text: str) -> str:
    return " ".join(_TAG.sub("", text).split())


# ----- captions -----------------------------------------------------------------------------
def read_multi30k(first: Path) -> list[list[str]]:
    """The caption groups of `SPLIT.1.en[.gz]` and its siblings SPLIT.2 … (one group a line)."""
    m = MULTI30K.match(first.name)
    if not m:
        raise InputError(f"{first}: not a Multi30k caption file (SPLIT.1.en[.gz])")
    columns = []
    for k in itertools.count(1):
        path = first.with_name(f"{m['stem']}.{k}.en{m['gz'] or ''}")
        if not path.is_file():
            break
        columns.append(_read_all(path, lambda fh: [_clean(x) for x in fh.read().splitlines()]))
    if len(columns) < 2 or len({len(c) for c in columns}) != 1:
        raise InputError(f"{first}: needs 2 or more line-aligned sibling files "
                         f"(found {len(columns)} with {sorted({len(c) for c in columns})} lines)")
    return [[c for c in group if c] for group in zip(*columns)]


def read_coco(path: Path) -> list[list[str]]:
    """The caption groups of a COCO captions JSON file, by image id."""
    try:
        data = _read_all(path, json.load)
        groups: dict[int, list[str]] = {}
        for a in data["annotations"]:
            groups.setdefault(int(a["image_id"]), []).append(_clean(str(a["caption"])))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise InputError(f"{path}: not a COCO captions file ({type(e).__name__}: {e})") from e
    return [[c for c in groups[k] if c] for k in sorted(groups)]


def group_pairs(groups: Iterable[Sequence[str]]) -> list[Pair]:
    """Every two different sentences of a group (captions of one image) as a pair."""
    return [Pair(a, b) for group in groups for a, b in itertools.combinations(group, 2)
            if normalise(a) != normalise(b)]


# ----- NLI ----------------------------------------------------------------------------------
def read_nli_csv(path: Path) -> list[tuple[str, str, str]]:
    """(premise, hypothesis, label name) rows of a `premise,hypothesis,label` CSV file."""

    def rows(fh: IO[str]) -> list[tuple[str, str, str]]:
        reader = csv.reader(fh)
        header = [h.strip().lower() for h in next(reader, [])]
        if header[:3] != ["premise", "hypothesis", "label"]:
            raise InputError(f"{path}: expected the header premise,hypothesis,label")
        out = []
        for row in reader:
            if len(row) != 3:
                raise InputError(f"{path}:{reader.line_num}: expected 3 fields, found {len(row)}")
            out.append((_clean(row[0]), _clean(row[1]), row[2].strip().lower()))
        return out

    return _read_all(path, rows)


def nli_pairs(rows: Iterable[tuple[str, str, str]]) -> list[Pair]:
    """Entailed hypotheses as positives of their premise, each with the premise's first
    contradicted hypothesis (if any) as hard negative."""
    rows = list(rows)
    contradiction: dict[str, str] = {}
    for premise, hypothesis, label in rows:
        if label == "contradiction":
            contradiction.setdefault(premise, hypothesis)
    return [Pair(p, h, contradiction.get(p)) for p, h, label in rows
            if label == "entailment" and p and h]


def read_pairs_file(path: Path) -> list[Pair]:
    """The pairs of one file, by its layout (see the module docstring)."""
    name = path.name.lower()
    if MULTI30K.match(path.name):
        return group_pairs(read_multi30k(path))
    if name.endswith((".json", ".json.gz")):
        return group_pairs(read_coco(path))
    if name.endswith((".csv", ".csv.gz")):
        return nli_pairs(read_nli_csv(path))
    return nli_pairs((p.premise, p.hypothesis, LABELS[p.label]) for p in read_nli_file(path))


def read_all_pairs(paths: Iterable[str | Path], read: Callable[[Path], list[Pair]],
                   what: str) -> list[Pair]:
    """The pairs `read` finds in each file, in order; a file that yields none is an error
    that says what it should have held."""
    pairs: list[Pair] = []
    for path in list_files(paths):
        found = read(path)
        if not found:
            raise InputError(f"{path}: no {what}")
        pairs.extend(found)
    return pairs


def read_pairs(paths: Iterable[str | Path]) -> list[Pair]:
    """The paraphrase pairs of several files, in order."""
    return read_all_pairs(paths, read_pairs_file,
                          "paraphrase pairs (captions or entailed hypotheses)")


# ----- evaluation overlap and validation split ----------------------------------------------
def _fields(fh: IO[str]) -> Iterator[str]:
    for line in fh:
        yield from line.split("\t")


@functools.lru_cache(maxsize=2)
def eval_sentences(folder: Path) -> frozenset[str]:
    """Every tab-separated field of every data file under `folder`, normalised (scores and ids
    come along; they never equal a sentence). Read once per process: a multi-task run filters
    its NLI and its paraphrase pairs against the same files."""
    files = [f for f in sorted(Path(folder).rglob("*"))
             if f.is_file() and not any(w in f.name.lower() for w in _NOT_DATA)]
    if not files:
        raise InputError(f"{folder}: no evaluation files to keep out of training")
    return frozenset(normalise(x) for f in files
                     for x in _read_all(f, lambda fh: list(_fields(fh))))


def drop_overlap(pairs: Iterable[P], held: AbstractSet[str]) -> tuple[list[P], int]:
    """(the pairs none of whose sentences is in `held`, how many were dropped); a pair is
    anything with `sentences()`: paraphrase pairs, NLI pairs."""
    kept, dropped = [], 0
    for p in pairs:
        if any(normalise(s) in held for s in p.sentences()):
            dropped += 1
        else:
            kept.append(p)
    return kept, dropped


def hold_out(items: Sequence[T], key: Callable[[T], str], sentences: Callable[[T], Iterable[str]],
             fraction: float, seed: int, what: str = "anchors") -> tuple[list[T], list[T]]:
    """(train, valid): a random `fraction` of the distinct keys, with all their items, held out;
    training items that share any sentence with a validation item are dropped, so no validation
    sentence is ever trained on. Raises InputError when either side would be empty."""
    keys = sorted({key(x) for x in items})
    n_valid = round(len(keys) * fraction)
    held = {keys[i] for i in np.random.default_rng(seed).permutation(len(keys))[:n_valid]}
    valid = [x for x in items if key(x) in held]
    seen = {s for x in valid for s in sentences(x)}
    train = [x for x in items if not any(s in seen for s in sentences(x))]
    if not train or not valid:
        raise InputError(f"{len(keys)} distinct {what} cannot be split into training and "
                         "validation; give more pairs or a --valid file")
    return train, valid
