"""Case-sensitive vocabulary of the V most frequent words plus <pad> (id 0) and <unk> (id 1).

Encoders look words up with a case-insensitive fallback (`encode(..., fold_case=True)`): a
word missing as typed ("hello", "paris") takes the id of its most frequent casing in the
vocabulary ("Hello", "Paris") instead of <unk>. Index builds and queries use the same lookup.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from qtsearch.core.errors import ModelError

if TYPE_CHECKING:
    import numpy as np

PAD, UNK = "<pad>", "<unk>"
_NO_TOKEN = [""]  # an empty list's place in `encode_many` (no token is empty)


class Vocab:
    def __init__(self, words: list[str]):
        if words[:2] != [PAD, UNK]:
            raise ValueError("a vocabulary starts with <pad>, <unk>")
        self.words = words
        self.index = dict(zip(words, range(len(words))))

    @functools.cached_property
    def folded(self) -> dict[str, int]:
        """Each casefolded word -> the id of its most frequent casing (the vocabulary is ranked
        by frequency); made when a word is first missing as written, which a query of known
        words never is."""
        # from the last word to the first, so that the first casing's id is the one kept; made
        # in C (a Python loop of setdefault was a noticeable part of a one-shot query's start)
        n = len(self.words)
        return dict(zip(map(str.casefold, reversed(self.words[2:])), range(n - 1, 1, -1)))

    def __len__(self) -> int:
        return len(self.words)

    @classmethod
    def build(cls, token_lists: Iterable[list[str]], size: int) -> Vocab:
        """Count words over a stream of token lists (nothing is kept but the counts)."""
        counts: Counter[str] = Counter()
        for tokens in token_lists:
            counts.update(tokens)
        counts.pop(PAD, None)
        counts.pop(UNK, None)
        # ties broken by the word itself so the vocabulary is deterministic
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:size]
        return cls([PAD, UNK] + [w for w, _ in ranked])

    def encode(self, tokens: list[str], max_len: int, fold_case: bool = False) -> list[int]:
        """Token ids, truncated (not dropped) to `max_len`; an empty sentence becomes [<unk>].
        `fold_case`: a token unknown as written gets the id of another casing of it."""
        tokens = tokens[:max_len]
        ids = list(map(self.index.get, tokens))  # in C: most tokens are known as written
        if fold_case and (None in ids or 0 in ids):  # "<pad>" typed is folded too, to <unk>
            ids = [i or self._folded_id(t) for i, t in zip(ids, tokens)]
        elif None in ids:
            ids = [1 if i is None else i for i in ids]
        return ids or [1]

    def encode_many(self, token_lists: Sequence[list[str]], max_len: int
                    ) -> tuple[np.ndarray, list[int], list[str]]:
        """`encode(tokens, max_len, fold_case=True)` of each list at once: every list's ids
        flat (int32), each one's count of them, and the token at each place ("" where an
        empty list's <unk> stands). One lookup over all the tokens (in C) and numpy for the
        missing ones: a build's tokenising workers spent more in `encode`'s per-list steps
        than in its lookups."""
        import numpy as np

        cut = [tokens[:max_len] for tokens in token_lists]
        words = list(itertools.chain.from_iterable(t or _NO_TOKEN for t in cut))
        ids = np.fromiter(map(self.index.get, words, itertools.repeat(0)), dtype=np.int32,
                          count=len(words))
        lacking = np.flatnonzero(ids == 0).tolist()  # missing as written, or "<pad>" itself
        if lacking:
            ids[lacking] = [self._folded_id(words[j]) if words[j] else 1 for j in lacking]
        return ids, [len(t) or 1 for t in cut], words

    def _folded_id(self, token: str) -> int:
        """The id of another casing of a token unknown as written (<unk>'s, 1, if none): the
        casefolded map is made here, on the first such token."""
        return self.folded.get(token.casefold(), 1)

    def knows(self, token: str) -> bool:
        """Whether `token` has an id of its own, as written or in another casing."""
        return token in self.index or token.casefold() in self.folded

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.words, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Vocab:
        try:
            words = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError as e:
            raise ModelError(f"{path}: vocabulary file missing") from e
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ModelError(f"{path}: vocabulary file is corrupt ({e})") from e
        if not isinstance(words, list) or words[:2] != [PAD, UNK]:
            raise ModelError(f"{path}: not a qtsearch vocabulary")
        return cls(words)
