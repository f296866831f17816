"""The query path (qtsearch/encoders/fast/fused.py: numpy + a numba loop) against the torch
modules."""

from __future__ import annotations

import numpy as np
import torch

from qtsearch.encoders.fast.fused import SmallBatchEncoder
from qtsearch.encoders.neural import SMALL_BATCH
from qtsearch.encoders.registry import load_encoder
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


def test_numpy_path_equals_the_torch_modules(shared_data, tiny_model, mc_model):
    """uni-GRU (the session's tiny model) and MC-QT (a small one), mixed lengths."""
    texts = [*_sentences(shared_data, 12), "Yes.", "word " * 80]  # 1 token; truncated
    for path in (tiny_model, mc_model):
        encoder = load_encoder(path, device="cpu", precision="fp32")
        small = SmallBatchEncoder.for_model(encoder.model)
        assert small is not None
        got = small.embed([encoder.token_ids(t) for t in texts])
        np.testing.assert_allclose(got, _torch_vectors(encoder, texts), atol=1e-5)


def test_encoder_uses_it_for_small_fp32_batches_only(shared_data, mc_model):
    texts = _sentences(shared_data, SMALL_BATCH + 4)
    fp32 = load_encoder(mc_model, device="cpu", precision="fp32")
    assert fp32._small_batches is not None
    small = fp32.encode(texts[:3], normalize=True)  # query path
    large = fp32.encode(texts, normalize=True)  # batch path (more than SMALL_BATCH)
    np.testing.assert_allclose(small, large[:3], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(small, axis=1), 1.0, atol=1e-5)
    assert load_encoder(mc_model, device="cpu", precision="bf16")._small_batches is None
    assert fp32.encode([], normalize=True).shape == (0, fp32.dim)


def test_word_projections_are_computed_once_and_warm_up_fills_them(shared_data, mc_model):
    """Rows computed on first use equal the whole table computed at warm-up; the threaded
    split of the GRUs gives the same vectors as one thread running them all."""
    from qtsearch.encoders.fast import fused

    encoder = load_encoder(mc_model, device="cpu", precision="fp32")
    ids = [encoder.token_ids(t) for t in _sentences(shared_data, 5)]
    lazy = SmallBatchEncoder.for_model(encoder.model)
    first = lazy.embed(ids)
    table = lazy.projections[0]
    used = {i for x in ids for i in x}
    assert set(np.flatnonzero(table.known)) == used | {0}  # the words seen (and the padding)
    np.testing.assert_array_equal(lazy.embed(ids), first)  # reused rows: same vectors

    warm = SmallBatchEncoder.for_model(encoder.model)
    warm.warm_up()
    assert all(p.known.all() for p in warm.projections)
    rows = sorted(used)
    np.testing.assert_allclose(warm.projections[0].rows[rows], table.rows[rows], atol=1e-6)
    np.testing.assert_allclose(warm.embed(ids), first, atol=1e-6)

    lengths = np.array([len(x) for x in ids])
    padded = np.zeros((len(ids), lengths.max()), dtype=np.int64)
    for r, x in enumerate(ids):
        padded[r, : len(x)] = x
    gi = np.concatenate([p.of(padded) for p in warm.projections], axis=-1)
    one = np.empty_like(first)
    fused._final_states(gi, warm.w_hh, warm.b_hh, warm.reverse, lengths, one, 0,
                        len(warm.w_hh))
    np.testing.assert_array_equal(warm.embed(ids), one)


def test_length_groups_only_where_they_save_padding():
    """A length-sorted batch is read in one call, a mixed one in groups; same states either
    way (padding never leaks), in input order."""
    from qtsearch.encoders.nn.quick_thoughts import read_in_length_groups

    calls: list[int] = []

    def read(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        calls.append(len(x))
        return x[torch.arange(len(x)), lengths - 1]  # each row's last real step

    x = torch.arange(8 * 50, dtype=torch.float32).reshape(8, 50, 1)
    similar = torch.tensor([20, 20, 19, 19, 19, 18, 18, 18])
    mixed = torch.tensor([50, 2, 3, 40, 2, 2, 45, 3])
    for lengths, expected_calls in ((similar, [8]), (mixed, [4, 4])):
        calls.clear()
        got = read_in_length_groups(read, x, lengths, group=4)
        assert calls == expected_calls
        torch.testing.assert_close(got, read(x, lengths))


def test_a_forked_child_encodes_queries_too(shared_data, mc_model):
    """The helper threads are per process: a child forked after queries (a pre-forking
    server) must not wait forever on its parent's threads, which do not exist in the child."""
    import os
    import time

    encoder = load_encoder(mc_model, device="cpu", precision="fp32")
    texts = _sentences(shared_data, 2)
    parent = encoder.encode(texts)  # the helper threads now exist in this process
    pid = os.fork()
    if pid == 0:  # child: same vectors, then leave without pytest's teardown
        ok = np.allclose(encoder.encode(texts), parent, atol=1e-6)
        os._exit(0 if ok else 1)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("the forked child hung encoding a query")
    assert os.waitstatus_to_exitcode(done[1]) == 0


def test_overlapping_queries_restore_the_blas_threads():
    """Two queries' one-thread BLAS limits overlapping in time (A in, B in, A out, B out, as a
    server's threads do) leave BLAS as it was, and hold it at one thread until both are out."""
    from qtsearch.core.blas import ONE_BLAS_THREAD

    controller = ONE_BLAS_THREAD.controller

    def blas_threads() -> set[int]:
        return {i["num_threads"] for i in controller.info() if i["user_api"] == "blas"}

    with controller.limit(limits=2, user_api="blas"):
        assert blas_threads() == {2}
        ONE_BLAS_THREAD.__enter__()  # query A
        ONE_BLAS_THREAD.__enter__()  # query B
        assert blas_threads() == {1}
        ONE_BLAS_THREAD.__exit__(None, None, None)  # A finishes while B still runs
        assert blas_threads() == {1}
        ONE_BLAS_THREAD.__exit__(None, None, None)
        assert blas_threads() == {2}
