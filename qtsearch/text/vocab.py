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
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from qtsearch.core.errors import ModelError

if TYPE_CHECKING:
    import numpy as np

    from qtsearch.text.token_table import TokenTable

PAD, UNK = "<pad>", "<unk>"


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

    def encode_table(self, table: TokenTable, max_len: int
                     ) -> tuple[np.ndarray, list[int], list[int], list[str]]:
        """`encode(tokens, max_len, fold_case=True)` of every text of a token table at once:
        their ids flat (int32), each text's count of them, and where <unk> stands for a token
        (flat places, an empty text's own <unk> not among them) with those tokens. Each
        distinct token is looked up once (in C) and placed by numpy: a build's tokenising
        workers spent more in per-token steps than in the lookups."""
        import numpy as np

        from qtsearch.text.token_rows import TokenRows

        found = np.fromiter(map(self.index.get, table.distinct, itertools.repeat(0)),
                            dtype=np.int32, count=len(table.distinct))
        lacking = np.flatnonzero(found == 0).tolist()  # missing as written, or "<pad>" itself
        if lacking:
            found[lacking] = [self._folded_id(table.distinct[j]) for j in lacking]
        # each text's tokens cut at max_len, an empty text's [<unk>]: as TokenRows.encoded
        # lays them out, here also to know which token stands at each place
        texts = TokenRows.from_offsets(table.place, np.concatenate([[0],
                                                                    np.cumsum(table.counts)]))
        offsets = texts.cut_offsets(max_len)
        source, where = texts.kept_places(0, len(texts), max_len, offsets)
        place = table.place[source]
        kept_ids = found[place]
        ids = np.ones(int(offsets[-1]), dtype=np.int32)
        ids[where] = kept_ids
        unknown = np.flatnonzero(kept_ids == 1)
        return (ids, np.diff(offsets).tolist(), where[unknown].tolist(),
                [table.distinct[j] for j in place[unknown].tolist()])

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
