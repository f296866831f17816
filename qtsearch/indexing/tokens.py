"""Tokenising the embed stage's shards on every core: sentences → vocabulary ids in worker
processes, shard by shard in order, one shard ahead of the encoder.

Processes, not threads: BlingFire's C call releases the GIL (ctypes), but it is only about a
third of a sentence's cost; the rest (scrubbing, the UTF-8 round trip, splitting, the
vocabulary lookups) is Python and holds the GIL, so threads would gain ~15% on 2 cores at most
(docs/indexing.md, "Tokenising in parallel"). Workers are spawned, not forked (the parent
holds torch's thread pools), import only the tokeniser and the vocabulary, and get the
vocabulary once; they ignore Ctrl-C, which the build handles. The ids are those of
`token_ids`, the function `Encoder.token_ids` calls, so rows and vectors are the serial
path's exactly. An open vocabulary (qtsearch.encoders.open_vocab) numbers a new word when it
first meets it, in the one process that holds its table: the workers look words up in the
closed vocabulary and send back the tokens it lacks with their composed rows, and the parent
numbers them in the texts' order, as the serial path does.

What a build learns of its tokens between passes (`BuildTokens`) is the build's own, not the
encoder's: the encoder may serve other builds and queries meanwhile.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any

from qtsearch.core.device import cpus
from qtsearch.core.processes import worker_pool
from qtsearch.text.tokenizer import token_table

if TYPE_CHECKING:  # not imported: the workers import this module, and need none of them
    import numpy as np

    from qtsearch.encoders.base import IndexEncoder, TokenEncoder
    from qtsearch.encoders.open_vocab import OpenVocab, WordCounts
    from qtsearch.encoders.pieces import LazyPieces, Pieces
    from qtsearch.text.token_rows import TokenRows
    from qtsearch.text.vocab import Vocab

#: Sentences per task: big enough that sending it costs little next to tokenising it, small
#: enough that the workers share out a 50k-sentence shard evenly.
CHUNK = 2_000
#: Builds of fewer sentences tokenise in the process: starting a worker (an interpreter,
#: BlingFire, the vocabulary) costs about what it saves on this many sentences.
MIN_SENTENCES = 20_000

#: The lower-cased words a worker composed for a task: those with a row, their rows stacked
#: (pickled as one buffer: an array a word took three times as long to send and receive), and
#: those none of whose pieces has a vector.
Composed = tuple[list[str], "np.ndarray | None", list[str]]
#: A task's answer: the ids of its texts flat (int32), each text's count of them, where the
#: closed vocabulary lacks a token (flat positions) with those tokens, and the composed rows
#: of the lower-cased words among them this worker has not sent before.
Chunk = tuple["np.ndarray", list[int], list[int], list[str], Composed]

_vocab: Vocab | None = None
_max_len = 0
_pieces: Pieces | LazyPieces | None = None
_composed: set[str] = set()  # the words this worker has composed and sent


@dataclass
class BuildTokens:
    """A build's state of its tokens, passed to what writes and reads it."""

    #: tokens embedded, and how many were composed or left <unk> (the build's report); None
    #: where the encoder does not count them (`TokenEncoder.counts_words`)
    counts: WordCounts | None = None
    #: token ids by shard from the corpus-words pass (qtsearch.encoders.corpus_words), taken
    #: by the embedding pass instead of tokenising again
    kept: dict[int, Sequence[Sequence[int]]] = field(default_factory=dict)

    @classmethod
    def for_encoder(cls, encoder: IndexEncoder) -> BuildTokens:
        from qtsearch.encoders.base import TokenEncoder
        from qtsearch.encoders.open_vocab import WordCounts

        counted = isinstance(encoder, TokenEncoder) and encoder.counts_words
        return cls(WordCounts() if counted else None)


def workers_for(count: int, device: str, light: bool = False) -> int:
    """Worker processes for tokenising `count` sentences for an encoder on `device`: one per
    CPU but the one feeding the GPU where the encoder runs there; on the CPU one per CPU for
    a `light` encoder (the mean-of-words model: a sparse sum, little beside tokenising, which
    leaves the cores to the tokenisers), else 0 (tokenise in this process: a network's own
    threads want the cores, on 2 cores workers beside its encoding made the stage slower,
    docs/indexing.md, "Tokenising in parallel", and `nn.GRU` waits at every step for a thread
    that a tokeniser has descheduled). Small builds: see MIN_SENTENCES."""
    n = cpus()
    if count < MIN_SENTENCES or n < 2:
        return 0
    return n - 1 if device == "cuda" else n if light else 0


@contextmanager
def shard_ids(texts_of: Callable[[int], list[str]], shards: list[int], count: int,
              encoder: TokenEncoder) -> Iterator[Iterator[Sequence[Sequence[int]]]]:
    """The token ids of each shard's texts, in order, exactly `encoder.token_ids`'s: made by
    worker processes where `workers_for` says (`count`: sentences in all), else by a thread
    one shard ahead where the encoder allows it (`TokenEncoder.tokenises_alongside`), else
    here. Leaving the block stops the workers, also on Ctrl-C."""
    from qtsearch.indexing.shards import one_ahead  # pyarrow: not for the workers

    workers = workers_for(count, encoder.device.type, light=encoder.light) if shards else 0
    if not workers:
        yield one_ahead(lambda shard: [encoder.token_ids(t) for t in texts_of(shard)], shards,
                        encoder.tokenises_alongside())
        return
    with closing(token_shards(texts_of, shards, encoder.vocab, encoder.max_len, workers,
                              encoder.open_vocab)) as ids:
        yield ids


@contextmanager
def shard_inputs(texts_of: Callable[[int], list[str]], shards: list[int], count: int,
                 encoder: TokenEncoder | None,
                 kept: dict[int, Sequence[Sequence[int]]] | None = None
                 ) -> Iterator[Iterator[Any]]:
    """What the embed stage encodes, shard by shard: the ids of `encoder` (one of our models)
    or, for an encoder without a vocabulary (encoder None), the texts. `count` sentences in
    all; `kept`: ids a pass before made (`BuildTokens.kept`), taken out as their shards come,
    the others made by `shard_ids`. Leaving the block stops the workers, also on Ctrl-C."""
    if encoder is None:
        yield map(texts_of, shards)
        return
    kept = {} if kept is None else kept
    with shard_ids(texts_of, [s for s in shards if s not in kept], count, encoder) as ids:
        yield (kept.pop(shard) if shard in kept else next(ids) for shard in shards)


def token_shards(texts_of: Callable[[int], list[str]], shards: list[int], vocab: Vocab,
                 max_len: int, workers: int,
                 open_vocab: OpenVocab | None = None) -> Iterator[TokenRows]:
    """The ids of each shard's texts under `vocab`, in order; while the caller works on one
    shard, the `workers` processes tokenise the next. With an `open_vocab` (`vocab` itself)
    the workers look tokens up in its closed vocabulary and compose the rows of those it
    lacks, and it numbers them here, token after token in the texts' order, as the serial
    path would."""
    closed = vocab if open_vocab is None else open_vocab.closed
    pieces = None if open_vocab is None else open_vocab.pieces
    with worker_pool(workers, _start, (closed, max_len, pieces)) as pool:
        pending: deque[list[Future[Chunk]]] = deque()
        for shard in shards:
            texts = texts_of(shard)
            pending.append([pool.submit(_ids, texts[i : i + CHUNK])
                            for i in range(0, len(texts), CHUNK)])
            if len(pending) > 1:
                yield _gather(pending.popleft(), open_vocab)
        while pending:
            yield _gather(pending.popleft(), open_vocab)


def _gather(futures: list[Future[Chunk]], open_vocab: OpenVocab | None) -> TokenRows:
    """A shard's ids from its tasks' answers, as one array (an array a text cost the build's
    process ~1.5 s of splitting at 1M sentences, and more to join them again)."""
    import numpy as np

    from qtsearch.text.token_rows import TokenRows

    chunks: list[np.ndarray] = []
    sizes: list[list[int]] = []
    for future in futures:
        chunk, lengths, at, unknown, (words, stacked, empty) = future.result()
        if unknown and open_vocab is not None:
            rows: dict[str, np.ndarray | None] = dict.fromkeys(empty)
            rows.update(zip(words, stacked if stacked is not None else [], strict=True))
            # each distinct token numbered once, in the order first met: the same ids
            number = {t: open_vocab.extended(t, rows) for t in dict.fromkeys(unknown)}
            chunk[np.asarray(at, dtype=np.int64)] = [number[t] for t in unknown]
        chunks.append(chunk)
        sizes.append(lengths)
    lengths_all = np.fromiter(chain.from_iterable(sizes), dtype=np.int64)
    return TokenRows.from_offsets(np.concatenate(chunks) if chunks else np.zeros(0, np.int32),
                                  np.concatenate([[0], np.cumsum(lengths_all)]))


def _start(vocab: Vocab, max_len: int, pieces: Pieces | LazyPieces | None) -> None:
    """A worker's set-up: the vocabulary and pieces kept for every task."""
    global _vocab, _max_len, _pieces
    _vocab, _max_len, _pieces = vocab, max_len, pieces


def _ids(texts: list[str]) -> Chunk:
    """The texts' ids under the closed vocabulary (`token_ids`'s, the task's looked up at
    once: `Vocab.encode_table`), flat, and where it lacks a token: what an open vocabulary
    numbers in the parent (`token_shards`)."""
    assert _vocab is not None, "a tokenising worker runs _start first"
    ids, lengths, at, unknown = _vocab.encode_table(token_table(texts), _max_len)
    new: list[str] = []  # words to compose, in the order met
    if _pieces is not None:
        for token in unknown:
            key = token.lower()
            if key not in _composed:
                _composed.add(key)  # sent once: the parent keeps what it numbers
                new.append(key)
    return ids, lengths, at, unknown, _stacked(new)


def _stacked(words: list[str]) -> Composed:
    """The rows this worker composes for `words`, as a task's answer sends them."""
    if _pieces is None or not words:
        return [], None, []
    import numpy as np

    rows = _pieces.compose_many(words)
    found = [w for w, r in zip(words, rows, strict=True) if r is not None]
    return (found, np.stack([r for r in rows if r is not None]) if found else None,
            [w for w, r in zip(words, rows, strict=True) if r is None])
