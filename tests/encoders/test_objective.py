"""The QT objective against a brute-force computation written from the paper's definition."""

from __future__ import annotations

import math

import pytest
import torch

from qtsearch.encoders.nn.objective import neighbour_mask, qt_loss


def brute_force(f: torch.Tensor, g: torch.Tensor, docs: list[int], context: int):
    n = len(docs)
    reach = (context - 1) // 2
    total, rows, correct, chance = 0.0, 0, 0, 0.0
    for i in range(n):
        neigh = [j for j in range(n) if j != i and abs(i - j) <= reach and docs[i] == docs[j]]
        if not neigh:
            continue
        scores = [float(f[i] @ g[j]) if j != i else -math.inf for j in range(n)]
        m = max(scores)
        log_z = m + math.log(sum(math.exp(s - m) for s in scores if s != -math.inf))
        total += -sum(scores[j] - log_z for j in neigh) / len(neigh)
        rows += 1
        best = max(range(n), key=lambda j: scores[j])
        correct += best in neigh
        chance += len(neigh) / (n - 1)
    return total / rows, correct, rows, chance


@pytest.mark.parametrize("context", [3, 5, 7])
@pytest.mark.parametrize(
    "docs", [[0] * 12, [0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 3, 3], [5] * 3 + [6] * 9]
)
def test_loss_matches_brute_force(context: int, docs: list[int]) -> None:
    torch.manual_seed(len(docs) + context)
    f, g = torch.randn(12, 6), torch.randn(12, 6)
    st = qt_loss(f, g, torch.tensor(docs), context)
    loss, correct, rows, chance = brute_force(f, g, docs, context)
    assert st.rows == rows
    assert st.correct == correct
    assert st.chance == pytest.approx(chance, rel=1e-6)
    assert float(st.loss) == pytest.approx(loss, rel=1e-5)


def test_mask_never_crosses_documents_or_the_diagonal() -> None:
    docs = torch.tensor([0, 0, 1, 1, 1, 2])
    m = neighbour_mask(docs, 3)
    assert not m.diagonal().any()
    assert m[1, 2].item() is False  # sentence 1 (doc 0) and 2 (doc 1) touch but differ in doc
    assert m[2, 3].item() and m[3, 2].item() and m[3, 4].item()
    assert m[5].sum() == 0  # a one-sentence document has no neighbour
    assert neighbour_mask(torch.zeros(10, dtype=torch.long), 5)[4].sum() == 4


def test_one_sentence_documents_are_left_out_of_the_loss() -> None:
    f, g = torch.randn(4, 3), torch.randn(4, 3)
    st = qt_loss(f, g, torch.tensor([0, 1, 2, 3]), 3)
    assert st.rows == 0 and float(st.loss) == 0.0


def test_gradient_flows_and_diagonal_does_not_poison_it() -> None:
    f = torch.randn(8, 4, requires_grad=True)
    g = torch.randn(8, 4, requires_grad=True)
    st = qt_loss(f, g, torch.zeros(8, dtype=torch.long), 3)
    st.loss.backward()
    assert torch.isfinite(f.grad).all() and torch.isfinite(g.grad).all()
    assert f.grad.abs().sum() > 0


@pytest.mark.parametrize("context", [0, 2, 4])
def test_bad_context_is_refused(context: int) -> None:
    with pytest.raises(ValueError):
        neighbour_mask(torch.zeros(5, dtype=torch.long), context)
