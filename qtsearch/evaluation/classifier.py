"""Linear probes on frozen sentence embeddings: standardised features, logistic regression, the
L2 penalty C picked on held-out data (never on the test part).

Why these choices: SentEval's probes are logistic regressions with a tuned L2 penalty. C runs
over a short grid; nested cross-validation holds out one inner fold instead of running all of
them (10× cheaper, the same test data never touches the choice of C). Every probe a protocol
needs at one stage (all folds × all C) goes to `solvers.fit` at once, which warm-starts each from
a close neighbour; the refit with the chosen C starts from the probe that chose it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy.stats import pearsonr
from sklearn.model_selection import StratifiedKFold, train_test_split

from qtsearch.core.errors import UsageError
from qtsearch.evaluation.solvers import Batch, Probe, fit, standardiser

#: Inverse L2 strengths tried, ascending (features are standardised, so small C matters most).
C_GRID = (0.001, 0.01, 0.1, 1.0)
DEFAULT_SOLVER = "lbfgs"


def onehot(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels as (targets [n, K], classes [K])."""
    classes, index = np.unique(y, return_inverse=True)
    return np.eye(len(classes))[index], classes


def fit_parts(X: np.ndarray, targets: tuple[np.ndarray, np.ndarray], parts: Sequence[np.ndarray],
              Cs: Sequence[float], solver: str = DEFAULT_SOLVER, init: list[Probe] | None = None,
              ) -> list[Probe]:
    """One probe per (rows, C) pair, fitted together; each standardised on its own rows."""
    stats = {id(rows): standardiser(X, rows) for rows in parts}
    weights = np.zeros((len(parts), len(X)))
    for p, rows in enumerate(parts):
        weights[p, rows] = 1.0
    batch = Batch(X, *targets, weights, np.stack([stats[id(r)][0] for r in parts]),
                  np.stack([stats[id(r)][1] for r in parts]), np.asarray(Cs, dtype=np.float64))
    return fit(batch, solver, init)


def select_refit(
    X: np.ndarray, targets: tuple[np.ndarray, np.ndarray],
    choices: Sequence[tuple[np.ndarray, Callable[[Probe], float]]],
    refits: Sequence[np.ndarray] | None = None, solver: str = DEFAULT_SOLVER,
    tick: Callable[[], None] | None = None,
) -> list[Probe]:
    """For each (training rows, score): the probe over C_GRID that `score` (on held-out data)
    likes best (the smallest C among ties); then, if `refits` (rows) are given, each refitted
    on its refit rows with the chosen C."""
    parts = [rows for rows, _ in choices for _ in C_GRID]
    probes = fit_parts(X, targets, parts, C_GRID * len(choices), solver)
    best = []
    for i, (_, score) in enumerate(choices):
        path = probes[i * len(C_GRID):(i + 1) * len(C_GRID)]
        scores = [score(p) for p in path]
        best.append(path[int(np.argmax(scores))])  # argmax: the first of equal scores
    if tick:
        tick()
    if refits is None:
        return best
    refitted = fit_parts(X, targets, refits, [p.C for p in best], solver, init=best)
    if tick:
        tick()
    return refitted


def accuracy(probe: Probe, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(probe.predict(X) == y) * 100.0)


def _scorer(X: np.ndarray, y: np.ndarray) -> Callable[[Probe], float]:
    return lambda p: accuracy(p, X, y)


def split_classify(train: tuple[np.ndarray, np.ndarray], dev: tuple[np.ndarray, np.ndarray],
                   solver: str = DEFAULT_SOLVER) -> Probe:
    """Pick C on the dev split and keep that probe (SentEval's protocol for given splits)."""
    X, y = train
    return select_refit(X, onehot(y), [(np.arange(len(y)), _scorer(*dev))], solver=solver)[0]


def _holdout(y: np.ndarray, rows: np.ndarray, holdout: float, seed: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """A stratified held-out part of `rows` (plain random when a class is too small to split,
    or the part too small to hold every class: a small `--limit`)."""
    counts = np.unique(y[rows], return_counts=True)[1]
    stratify = counts.min() >= 2 and math.ceil(holdout * len(rows)) >= len(counts)
    a, b = train_test_split(np.arange(len(rows)), test_size=holdout,
                            stratify=y[rows] if stratify else None, random_state=seed)
    return rows[a], rows[b]


def _nested(X: np.ndarray, y: np.ndarray, train_parts: Sequence[np.ndarray], holdout: float,
            seed: int, solver: str, tick: Callable[[], None] | None = None) -> list[Probe]:
    """For each training part: C chosen on a held-out piece of it, then refitted on all of it."""
    choices, refits = [], []
    for rows in train_parts:
        fit_rows, val = _holdout(y, rows, holdout, seed)
        choices.append((fit_rows, _scorer(X[val], y[val])))
        refits.append(rows)
    return select_refit(X, onehot(y), choices, refits, solver, tick)


def holdout_classify(X: np.ndarray, y: np.ndarray, seed: int = 0, holdout: float = 0.1,
                     solver: str = DEFAULT_SOLVER) -> Probe:
    """No dev split: pick C on a stratified held-out part of train, then refit on all of it."""
    return _nested(X, y, [np.arange(len(y))], holdout, seed, solver)[0]


def kfold_accuracy(X: np.ndarray, y: np.ndarray, folds: int = 10, seed: int = 0,
                   progress: Callable[[], None] | None = None, solver: str = DEFAULT_SOLVER,
                   ) -> tuple[float, float]:
    """Mean and standard deviation of test accuracy over stratified k-fold cross-validation;
    C is chosen inside each training part (nested), never on its test fold. `progress` is
    called twice: after choosing C for every fold, after refitting."""
    smallest = int(np.unique(y, return_counts=True)[1].min())
    if smallest < folds:
        raise UsageError(f"{folds}-fold cross-validation needs {folds} examples of every "
                         f"class, and one class has {smallest} here: raise --limit")
    splits = list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y))
    probes = _nested(X, y, [tr for tr, _ in splits], 1.0 / (folds - 1), seed, solver, progress)
    accs = [accuracy(p, X[te], y[te]) for p, (_, te) in zip(probes, splits, strict=True)]
    return float(np.mean(accs)), float(np.std(accs))


# --- score-distribution regression (Tai et al. 2015, as in SentEval's relatedness tasks) -----


def score_targets(y: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """A real score y in [lo, hi] as a distribution over the integers lo..hi with mass on
    floor(y) and floor(y)+1 whose mean is y: (targets [n, hi − lo + 1], classes lo..hi).
    Cross-entropy with these targets is the KL objective of the score distribution."""
    y = np.clip(np.asarray(y, dtype=np.float64), lo, hi)
    floor = np.minimum(np.floor(y), hi - 1)
    upper = y - floor
    targets = np.zeros((len(y), hi - lo + 1))
    index = np.arange(len(y))
    targets[index, (floor - lo).astype(np.int64)] = 1.0 - upper
    targets[index, (floor - lo).astype(np.int64) + 1] = upper
    return targets, np.arange(lo, hi + 1)


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    if np.std(a) == 0 or np.std(b) == 0:
        return 0.0
    return float(pearsonr(a, b).statistic)


def distribution_regression(
    X: np.ndarray, y: np.ndarray, lo: int, hi: int,
    dev: tuple[np.ndarray, np.ndarray] | None = None, seed: int = 0, holdout: float = 0.1,
    solver: str = DEFAULT_SOLVER,
) -> Probe:
    """Fit the score-distribution probe; C by Pearson r on `dev`, or on a held-out part of the
    training pairs (then refitted on all of them)."""
    targets = score_targets(y, lo, hi)

    def r_on(Xd: np.ndarray, yd: np.ndarray) -> Callable[[Probe], float]:
        return lambda p: _pearson(p.expected(Xd), yd)

    if dev is not None:
        return select_refit(X, targets, [(np.arange(len(y)), r_on(*dev))], solver=solver)[0]
    tr, va = train_test_split(np.arange(len(y)), test_size=holdout, random_state=seed)
    return select_refit(X, targets, [(tr, r_on(X[va], y[va]))], [np.arange(len(y))],
                        solver)[0]
