"""The Yelp sentences of the data folder: the analogy pool, and Li et al.'s sentiment rewrites.

Shen et al.'s sentences are lowercased and tokenised (`did n't`, `i 'm`, `...`); Li et al.'s human
rewrites are raw text, so they are brought to the same form (`normalise`) before they meet the
pool, or an encoder could tell a rewrite from a Yelp sentence by its spelling alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from qtsearch.core.errors import InputError
from qtsearch.core.paths import data_root
from qtsearch.text.tokenizer import tokenize

#: The Yelp sentence files, in the order their sentences enter the pool (first copy kept).
YELP_FILES = tuple(
    f"{corpus}/sentiment.{split}.{label}"
    for corpus in ("shen2017", "li2018") for split in ("dev", "test") for label in (0, 1)
)
REFERENCES = ("li2018/reference.0", "li2018/reference.1")  # source<TAB>rewrite, label of source


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as e:
        raise InputError(f"{path}: Yelp file missing") from e
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text") from e


def unique(sentences: Iterable[str]) -> list[str]:
    """First copy of each non-empty sentence, in order (whitespace-normalised)."""
    seen: dict[str, None] = {}
    for s in sentences:
        s = " ".join(s.split())
        if s:
            seen.setdefault(s, None)
    return list(seen)


def load_yelp(data_dir: Path | None = None) -> list[str]:
    """The ~172k unique Yelp sentences (Shen et al. 2017 dev+test, Li et al. 2018 dev+test)."""
    yelp = data_root(data_dir, need="yelp")
    return unique(line for name in YELP_FILES for line in _read_lines(yelp / name))


_APOSTROPHE = re.compile(r" ' (m|s|re|ve|ll|d)\b")
_ELLIPSIS = re.compile(r"\.(?: \.){2,}")


def normalise(text: str) -> str:
    """Raw text → the Shen et al. form: lowercase BlingFire tokens, `i 'm`, `...`."""
    joined = " ".join(tokenize(text.lower()))
    return _ELLIPSIS.sub("...", _APOSTROPHE.sub(r" '\1", joined))


def load_rewrites(data_dir: Path | None = None) -> list[tuple[str, str]]:
    """(negative, positive) sentence pairs from Li et al.'s human sentiment rewrites.

    reference.0 holds negative sources with positive rewrites, reference.1 the opposite; both
    are put in the (negative, positive) direction so any two pairs make a consistent analogy.
    """
    yelp = data_root(data_dir, need="yelp")
    out = []
    for label, name in enumerate(REFERENCES):
        for n, line in enumerate(_read_lines(yelp / name), 1):
            parts = line.split("\t")
            if len(parts) != 2:
                raise InputError(f"{yelp / name}:{n}: expected source<TAB>rewrite")
            source, rewrite = " ".join(parts[0].split()), normalise(parts[1])
            if not source or not rewrite or source == rewrite:
                continue  # no rewrite, no analogy
            out.append((source, rewrite) if label == 0 else (rewrite, source))
    return out
