"""The numpy path that encodes queries (qtsearch/models/fused.py) against the torch modules."""

from __future__ import annotations

import numpy as np
import torch

from qtsearch.embed import load_encoder
from qtsearch.models.fused import MAX_BATCH, SmallBatchEncoder
from qtsearch.text.reader import read_sentences

EMMA = "gutenberg/0003-austen-jane--emma.txt.gz"


def _sentences(shared_data, n: int) -> list[str]:
    stream = read_sentences([str(shared_data / EMMA)], split=True)
    return [s.text for _, s in zip(range(n), stream)]


def _torch_vectors(encoder, texts: list[str]) -> np.ndarray:
    ids = [encoder.token_ids(t) for t in texts]
    lengths = torch.tensor([len(x) for x in ids])
    batch = torch.zeros(len(ids), int(lengths.max()), dtype=torch.long)
    for r, x in enumerate(ids):
        batch[r, : len(x)] = torch.tensor(x)
    with torch.inference_mode():
        return encoder.model.embed(batch, lengths).numpy()


def test_numpy_path_equals_the_torch_modules(shared_data, tiny_model):
    """uni-GRU (the session's tiny model) and MC-QT (the shipped model), mixed lengths."""
    texts = [*_sentences(shared_data, 12), "Yes.", "word " * 80]  # 1 token; truncated
    for path in (tiny_model, None):
        encoder = load_encoder(path, device="cpu", precision="fp32")
        small = SmallBatchEncoder.for_model(encoder.model)
        assert small is not None
        got = small.embed([encoder.token_ids(t) for t in texts])
        np.testing.assert_allclose(got, _torch_vectors(encoder, texts), atol=1e-5)


def test_encoder_uses_it_for_small_fp32_batches_only(shared_data):
    texts = _sentences(shared_data, MAX_BATCH + 4)
    fp32 = load_encoder(None, device="cpu", precision="fp32")
    assert fp32._small_batches is not None
    small = fp32.encode(texts[:3], normalize=True)  # numpy path
    large = fp32.encode(texts, normalize=True)  # torch path (more than MAX_BATCH)
    np.testing.assert_allclose(small, large[:3], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(small, axis=1), 1.0, atol=1e-5)
    assert load_encoder(None, device="cpu", precision="bf16")._small_batches is None
    assert fp32.encode([], normalize=True).shape == (0, fp32.dim)
