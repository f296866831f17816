"""Tokenising the embed stage's shards on every core: sentences → vocabulary ids in worker
processes, shard by shard in order, one shard ahead of the encoder.

Processes, not threads: BlingFire's C call releases the GIL (ctypes), but it is only about a
third of a sentence's cost; the rest (scrubbing, the UTF-8 round trip, splitting, the
vocabulary lookups) is Python and holds the GIL, so threads would gain ~15% on 2 cores at most
(docs/indexing.md, "Tokenising in parallel"). Workers are spawned, not forked (the parent
holds torch's thread pools), import only the tokeniser and the vocabulary, and get the
vocabulary once; they ignore Ctrl-C, which the build handles. The ids are those of
`token_ids`, the function `Encoder.token_ids` calls, so rows and vectors are the serial
path's exactly.

What a build learns of its tokens between passes (`BuildTokens`) is the build's own, not the
encoder's: the encoder may serve other builds and queries meanwhile.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from qtsearch.text.tokenizer import token_ids

if TYPE_CHECKING:  # not imported: the workers import this module, and need none of them
    import numpy as np

    from qtsearch.encoders.base import IndexEncoder, TokenEncoder
    from qtsearch.encoders.open_vocab import WordCounts
    from qtsearch.text.vocab import Vocab

#: Sentences per task: big enough that sending it costs little next to tokenising it, small
#: enough that the workers share out a 50k-sentence shard evenly.
CHUNK = 2_000
#: Builds of fewer sentences tokenise in the process: starting a worker (an interpreter,
#: BlingFire, the vocabulary) costs about what it saves on this many sentences.
MIN_SENTENCES = 20_000

_vocab: Vocab | None = None
_max_len = 0


@dataclass
class BuildTokens:
    """A build's state of its tokens, passed to what writes and reads it."""

    #: tokens embedded, and how many were composed or left <unk> (the build's report); None
    #: where the encoder does not count them (`TokenEncoder.counts_words`)
    counts: WordCounts | None = None
    #: token ids by shard from the corpus-words pass (qtsearch.encoders.corpus_words), taken
    #: by the embedding pass instead of tokenising again
    kept: dict[int, list[np.ndarray]] = field(default_factory=dict)

    @classmethod
    def for_encoder(cls, encoder: IndexEncoder) -> BuildTokens:
        from qtsearch.encoders.base import TokenEncoder
        from qtsearch.encoders.open_vocab import WordCounts

        counted = isinstance(encoder, TokenEncoder) and encoder.counts_words
        return cls(WordCounts() if counted else None)


def cpus() -> int:
    """CPUs this process may run on (its affinity, which containers often narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def workers_for(count: int, device: str) -> int:
    """Worker processes for tokenising `count` sentences for an encoder on `device`: one per
    CPU but the one feeding the GPU where the encoder runs there, else 0 (tokenise in this
    process). On the CPU the encoder's own threads want the cores: on 2 cores, workers beside
    the encoding made the stage slower (docs/indexing.md, "Tokenising in parallel"), and
    `nn.GRU` waits at every step for a thread that a tokeniser has descheduled. Small builds:
    see MIN_SENTENCES."""
    n = cpus()
    return n - 1 if device == "cuda" and n > 1 and count >= MIN_SENTENCES else 0


@contextmanager
def shard_inputs(texts_of: Callable[[int], list[str]], shards: list[int], count: int,
                 encoder: TokenEncoder | None,
                 kept: dict[int, list[np.ndarray]] | None = None) -> Iterator[Iterator[Any]]:
    """What the embed stage encodes, shard by shard: the ids of `encoder` (one of our models)
    or, for an encoder without a vocabulary (encoder None), the texts. `count` sentences in
    all; worker processes tokenise where `workers_for` says, else a thread tokenises the next
    shard where the encoder allows it (`TokenEncoder.tokenises_alongside`), else this thread.
    `kept`: ids a pass before made (`BuildTokens.kept`), taken out as their shards come.
    Leaving the block stops the workers, also on Ctrl-C."""
    from qtsearch.indexing.shards import one_ahead  # pyarrow: not for the workers

    if encoder is None:
        yield map(texts_of, shards)
        return
    # an open vocabulary (qtsearch.encoders.open_vocab) numbers new words as it meets them: the
    # ids of one process only mean anything to its own table
    workers = 0 if encoder.open_vocab is not None else workers_for(count, encoder.device.type)
    if workers:
        with closing(token_shards(texts_of, shards, encoder.vocab, encoder.max_len,
                                  workers)) as ids:
            yield ids
        return

    kept = {} if kept is None else kept

    def ids_of(shard: int) -> list[list[int]]:
        if shard in kept:
            return kept.pop(shard)
        return [encoder.token_ids(t) for t in texts_of(shard)]

    yield one_ahead(ids_of, shards, encoder.tokenises_alongside())


def token_shards(texts_of: Callable[[int], list[str]], shards: list[int], vocab: Vocab,
                 max_len: int, workers: int) -> Iterator[list[list[int]]]:
    """The ids of each shard's texts, in order; while the caller works on one shard, the
    `workers` processes tokenise the next."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start,
                             initargs=(vocab, max_len)) as pool:
        pending: deque[list[Future[list[list[int]]]]] = deque()
        try:
            for shard in shards:
                texts = texts_of(shard)
                pending.append([pool.submit(_ids, texts[i : i + CHUNK])
                                for i in range(0, len(texts), CHUNK)])
                if len(pending) > 1:
                    yield _gather(pending.popleft())
            while pending:
                yield _gather(pending.popleft())
        finally:  # interrupted or failed: nothing more to tokenise
            pool.shutdown(wait=True, cancel_futures=True)


def _gather(futures: list[Future[list[list[int]]]]) -> list[list[int]]:
    ids: list[list[int]] = []
    for future in futures:
        ids.extend(future.result())
    return ids


def _start(vocab: Vocab, max_len: int) -> None:
    """A worker's set-up: the vocabulary kept for every task; Ctrl-C is the parent's."""
    global _vocab, _max_len
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _vocab, _max_len = vocab, max_len


def _ids(texts: list[str]) -> list[list[int]]:
    assert _vocab is not None, "a tokenising worker runs _start first"
    return [token_ids(_vocab, text, _max_len) for text in texts]
