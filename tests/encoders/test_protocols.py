"""Every encoder states what the build, the search and the evaluation read of it (the protocols
of qtsearch.encoders.base), and a build's token state is the build's, not the encoder's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from qtsearch.encoders.base import EvalEncoder, IndexEncoder, TokenEncoder
from qtsearch.encoders.baselines import GloveBow
from qtsearch.encoders.corpus_words import refines
from qtsearch.encoders.neural import Encoder
from qtsearch.encoders.open_vocab import WordCounts
from qtsearch.encoders.registry import load_encoder
from qtsearch.evaluation.vector_cache import encoder_key
from qtsearch.indexing.tokens import BuildTokens
from qtsearch.search.words import composed_words, vocabulary

TEXT = "Statin use and keratoconus."


def test_the_shipped_mean_model_is_a_token_encoder_with_an_open_vocabulary() -> None:
    enc = load_encoder(None, device="cpu")
    assert isinstance(enc, TokenEncoder) and isinstance(enc, EvalEncoder)
    assert enc.open_vocab is not None and enc.vocab is enc.open_vocab and refines(enc)
    assert enc.counts_words and enc.amp is None and not enc.quick_thoughts
    assert not hasattr(enc, "counts") and not hasattr(enc, "kept_ids")  # the build's now
    assert encoder_key(enc).startswith(f"{enc.fingerprint}-cpu-fp32-")
    assert vocabulary(enc)[:2] == ["<pad>", "<unk>"]


def test_counts_are_the_callers_and_change_no_vector() -> None:
    enc = load_encoder(None, device="cpu")
    ids = enc.token_ids(TEXT)
    counts = BuildTokens.for_encoder(enc).counts
    assert counts is not None
    counted = enc.encode_ids([ids], counts=counts)
    assert counts.tokens == len(ids)
    assert counts.composed == len(composed_words(enc, TEXT))
    np.testing.assert_array_equal(counted, enc.encode_ids([ids]))
    assert counts.tokens == len(ids)  # a call without counts counts nothing


def test_a_torch_model_is_a_token_encoder_whose_check_computes_nothing(
        tiny_model: Path) -> None:
    enc = Encoder(tiny_model, device="cpu")
    assert isinstance(enc, TokenEncoder)
    # the check reads members without running any: the compiled CPU paths stay unloaded
    assert "_large_batches" not in vars(enc) and "_small_batches" not in vars(enc)
    assert enc.open_vocab is None and not refines(enc) and enc.quick_thoughts
    assert not enc.counts_words and BuildTokens.for_encoder(enc).counts is None
    assert composed_words(enc, TEXT) == []
    counts = WordCounts()
    ids = [enc.token_ids(TEXT), enc.token_ids("She was happy.")]
    enc.encode_ids(ids, counts=counts)
    assert counts.tokens == sum(map(len, ids)) and counts.composed == 0


def test_a_baseline_is_an_index_encoder_without_token_ids() -> None:
    glove = GloveBow()
    assert isinstance(glove, IndexEncoder) and not isinstance(glove, TokenEncoder)
    assert not refines(glove) and vocabulary(glove) == [] and composed_words(glove, TEXT) == []
    assert BuildTokens.for_encoder(glove).counts is None
    assert encoder_key(glove).startswith(f"{glove.fingerprint}-cpu-fp32-")


def test_an_encoder_that_says_nothing_of_how_it_runs_is_fp32_on_the_cpu() -> None:
    class Bare:
        name, dim, fingerprint = "bare", 3, "f00"

        def encode(self, sentences, batch_size=512, normalize=False, progress=None):
            return np.zeros((len(sentences), 3), dtype=np.float32)

    assert not isinstance(Bare(), EvalEncoder)
    assert encoder_key(Bare()).startswith("f00-cpu-fp32-")
