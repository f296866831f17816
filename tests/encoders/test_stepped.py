"""The CPU batch path (qtsearch/encoders/fast/stepped.py) against the model's own nn.GRU modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qtsearch.encoders.fast import stepped
from qtsearch.encoders.fast.stepped import SteppedEncoder
from qtsearch.encoders.nn.quick_thoughts import EncoderConfig, QuickThoughts
from qtsearch.encoders.registry import load_encoder
from qtsearch.text.reader import read_sentences

EMMA = "gutenberg/0003-austen-jane--emma.txt.gz"


def _batch(encoder, shared_data, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n real sentences (lengths 1 to max_len, in reading order: unsorted) as padded ids."""
    stream = read_sentences([str(shared_data / EMMA)], split=True)
    ids = [encoder.token_ids(s.text) for _, s in zip(range(n), stream)]
    ids[3] = ids[3][:1]  # a one-token sentence among them
    lengths = torch.tensor([len(x) for x in ids])
    batch = torch.zeros(n, int(lengths.max()) + 3, dtype=torch.long)  # extra padding too
    for r, x in enumerate(ids):
        batch[r, : len(x)] = torch.tensor(x)
    return batch, lengths


def _reference(encoder, batch, lengths, dtype):
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16)
    with torch.inference_mode(), autocast:
        return encoder.model.embed(batch, lengths).float().numpy()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.slow
def test_stepped_path_equals_the_torch_modules(shared_data, tiny_model, mc_model, dtype):
    """uni-GRU (the session's tiny model) and MC-QT (a small one), rows in input order."""
    for path in (tiny_model, mc_model):
        encoder = load_encoder(path, device="cpu", precision="fp32")
        batch, lengths = _batch(encoder, shared_data, 60)
        fast = SteppedEncoder.for_model(encoder.model, dtype)
        assert fast is not None
        got = fast.embed(batch, lengths).numpy()
        want = _reference(encoder, batch, lengths, dtype)
        if dtype == torch.float32:
            np.testing.assert_allclose(got, want, atol=2e-5)
        else:  # both round to bf16 at every step, in different places
            cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
            assert cos.min() > 0.999


def test_encoder_uses_it_on_the_cpu_for_batches(shared_data, mc_model):
    encoder = load_encoder(mc_model, device="cpu", precision="bf16")
    assert encoder._large_batches is not None and encoder._large_batches.dtype == torch.bfloat16
    batch, lengths = _batch(encoder, shared_data, 40)
    ids = [row[:n].tolist() for row, n in zip(batch, lengths.tolist(), strict=True)]
    got = encoder.encode_ids(ids, batch_size=16)  # several batches, sorted and put back
    want = _reference(encoder, batch, lengths, torch.bfloat16)
    cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() > 0.999


def test_models_without_gru_readers_or_too_large_keep_nn_modules(monkeypatch):
    bow = QuickThoughts(EncoderConfig(encoder="bow", vocab_size=100, word_dim=8))
    assert SteppedEncoder.for_model(bow, torch.float32) is None
    uni = QuickThoughts(EncoderConfig(encoder="uni", vocab_size=100, word_dim=8, hidden=4))
    assert SteppedEncoder.for_model(uni, torch.float32) is not None
    table_bytes = 2 * 100 * 3 * 4 * 4  # 2 GRUs x vocabulary x 3H x fp32
    monkeypatch.setattr(stepped, "MAX_TABLE_BYTES", table_bytes - 1)
    assert SteppedEncoder.for_model(uni, torch.float32) is None


@pytest.mark.slow
def test_batches_in_flight_come_back_in_order_and_a_caller_may_stop_early(shared_data,
                                                                          mc_model):
    """embed_all hands batches to the helper threads ahead of the caller (two torch threads
    here, the suite's one would step them in this thread): each result is its own batch's
    (tagged), and stopping after the first leaves torch's thread count as it was."""
    encoder = load_encoder(mc_model, device="cpu", precision="bf16")
    fast = encoder._large_batches
    batch, lengths = _batch(encoder, shared_data, 40)
    parts = [(i, batch[i : i + 8], lengths[i : i + 8]) for i in range(0, 40, 8)]
    alone = [fast.embed(ids, n) for _, ids, n in parts]  # one thread: no helpers
    suite_threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        got = list(fast.embed_all(parts))
        assert [tag for tag, _ in got] == [0, 8, 16, 24, 32]
        for want, (_, vec) in zip(alone, got, strict=True):
            torch.testing.assert_close(vec, want)
        stream = fast.embed_all(parts)
        first = next(stream)
        stream.close()  # the batches still queued are cancelled
        torch.testing.assert_close(first[1], alone[0])
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(suite_threads)


def test_more_cores_than_grus_split_the_rows_too(shared_data, tiny_model, monkeypatch):
    """A uni-GRU model has two GRUs: on four cores each GRU's rows are halved, so that every
    core has a share; the vectors are those of one thread doing it all."""
    import os

    assert stepped._shares(2, 60, 4) == [(0, 1, 0, 30), (0, 1, 30, 60), (1, 2, 0, 30),
                                         (1, 2, 30, 60)]
    assert stepped._shares(8, 512, 2) == [(0, 4, 0, 512), (4, 8, 0, 512)]
    assert stepped._shares(2, 3, 16) == [(0, 1, 0, 1), (0, 1, 1, 2), (0, 1, 2, 3),
                                         (1, 2, 0, 1), (1, 2, 1, 2), (1, 2, 2, 3)]
    encoder = load_encoder(tiny_model, device="cpu", precision="fp32")
    fast = SteppedEncoder.for_model(encoder.model, torch.bfloat16)
    batch, lengths = _batch(encoder, shared_data, 60)
    alone = fast.embed(batch, lengths)  # the suite's one torch thread
    suite_threads = torch.get_num_threads()
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    torch.set_num_threads(4)
    try:
        split = fast.embed(batch, lengths)
    finally:
        torch.set_num_threads(suite_threads)
    torch.testing.assert_close(split, alone, atol=0, rtol=0)  # row by row the same arithmetic
