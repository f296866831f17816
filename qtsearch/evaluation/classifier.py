"""Linear probes on frozen sentence embeddings: standardised features, scikit-learn logistic
regression, the L2 penalty C picked on held-out data (never on the test part).

Why these choices: SentEval's probes are logistic regressions with a tuned L2 penalty; scikit-learn
keeps that on CPU without a training loop of our own. C runs over a short grid in ascending order
with warm starts, so each larger C starts from the previous solution (few L-BFGS steps), and
nested cross-validation holds out one inner fold instead of running all of them (10× cheaper,
the same test data never touches the choice of C).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import pearsonr
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.preprocessing import StandardScaler

#: Inverse L2 strengths tried, ascending (features are standardised, so small C matters most).
C_GRID = (0.001, 0.01, 0.1, 1.0)
MAX_ITER = 300


@dataclass
class Probe:
    """A fitted probe: the feature scaler and the logistic regression on top."""

    scaler: StandardScaler
    clf: LogisticRegression
    C: float

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.clf.predict(self.scaler.transform(X))

    def expected(self, X: np.ndarray) -> np.ndarray:
        """Expected class value under the predicted distribution (score-distribution regression)."""
        proba = self.clf.predict_proba(self.scaler.transform(X))
        return proba @ self.clf.classes_.astype(np.float64)


def _fit_path(
    X: np.ndarray, y: np.ndarray, weights: np.ndarray | None, grid: tuple[float, ...],
    scaler: StandardScaler, seed: int,
):
    """Yield a Probe per C of `grid` (ascending), each warm-started from the previous one."""
    Xs = scaler.transform(X)
    clf = LogisticRegression(C=grid[0], max_iter=MAX_ITER, warm_start=True, random_state=seed)
    for C in grid:
        clf.set_params(C=C)
        with warnings.catch_warnings():
            # a probe stopped at MAX_ITER is still a fair probe; the warning would flood stderr
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(Xs, y, sample_weight=weights)
        yield Probe(scaler, clf, C)


def select(
    X: np.ndarray, y: np.ndarray, score: Callable[[Probe], float],
    weights: np.ndarray | None = None, fit_rows: np.ndarray | None = None,
    grid: tuple[float, ...] = C_GRID, seed: int = 0,
) -> Probe:
    """Fit one probe per C on (X, y) and keep the one `score` (on held-out data) likes best.

    `fit_rows` are the rows the scaler is fitted on (default all); expanded data for
    score-distribution regression repeats rows, so the scaler sees each sentence pair once.
    """
    scaler = StandardScaler().fit(X if fit_rows is None else X[fit_rows])
    best, best_score = None, -np.inf
    for probe in _fit_path(X, y, weights, grid, scaler, seed):
        s = score(probe)
        if best is None or s > best_score:
            best, best_score = copy.deepcopy(probe), s
    assert best is not None
    return best


def refit(probe: Probe, X: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None,
          fit_rows: np.ndarray | None = None, seed: int = 0) -> Probe:
    """Fit again on more data with the chosen C (train + held-out part)."""
    scaler = StandardScaler().fit(X if fit_rows is None else X[fit_rows])
    return next(_fit_path(X, y, weights, (probe.C,), scaler, seed))


def accuracy(probe: Probe, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(probe.predict(X) == y) * 100.0)


def split_classify(train: tuple[np.ndarray, np.ndarray], dev: tuple[np.ndarray, np.ndarray],
                   seed: int = 0) -> Probe:
    """Pick C on the dev split and keep that probe (SentEval's protocol for given splits)."""
    X, y = train
    return select(X, y, lambda p: accuracy(p, *dev), seed=seed)


def holdout_classify(X: np.ndarray, y: np.ndarray, seed: int = 0, holdout: float = 0.1) -> Probe:
    """No dev split: pick C on a stratified held-out part of train, then refit on all of it."""
    rare = np.unique(y, return_counts=True)[1].min() < 2  # a class too small to stratify
    tr, va = train_test_split(np.arange(len(y)), test_size=holdout,
                              stratify=None if rare else y, random_state=seed)
    probe = select(X[tr], y[tr], lambda p: accuracy(p, X[va], y[va]), seed=seed)
    return refit(probe, X, y, seed=seed)


def kfold_accuracy(X: np.ndarray, y: np.ndarray, folds: int = 10, seed: int = 0,
                   progress: Callable[[], None] | None = None) -> tuple[float, float]:
    """Mean and standard deviation of test accuracy over stratified k-fold cross-validation;
    C is chosen inside each training part (nested), never on its test fold."""
    accs = []
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y):
        probe = holdout_classify(X[tr], y[tr], seed=seed, holdout=1.0 / (folds - 1))
        accs.append(accuracy(probe, X[te], y[te]))
        if progress:
            progress()
    return float(np.mean(accs)), float(np.std(accs))


# --- score-distribution regression (Tai et al. 2015, as in SentEval's relatedness tasks) -----


def expand_scores(y: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A real score y in [lo, hi] as a distribution over the integers lo..hi with mass on
    floor(y) and floor(y)+1 whose mean is y. Returns (row, class, weight) triples, zero weights
    dropped: cross-entropy with these weights is the KL objective of the score distribution."""
    y = np.clip(np.asarray(y, dtype=np.float64), lo, hi)
    floor = np.minimum(np.floor(y), hi - 1)
    upper = y - floor
    rows = np.concatenate([np.arange(len(y)), np.arange(len(y))])
    classes = np.concatenate([floor, floor + 1]).astype(np.int64)
    weights = np.concatenate([1.0 - upper, upper])
    keep = weights > 1e-9
    return rows[keep], classes[keep], weights[keep]


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    if np.std(a) == 0 or np.std(b) == 0:
        return 0.0
    return float(pearsonr(a, b).statistic)


def distribution_regression(
    X: np.ndarray, y: np.ndarray, lo: int, hi: int,
    dev: tuple[np.ndarray, np.ndarray] | None = None, seed: int = 0, holdout: float = 0.1,
) -> Probe:
    """Fit the score-distribution probe; C by Pearson r on `dev`, or on a held-out part of the
    training pairs (then refitted on all of them)."""

    def fit(Xt: np.ndarray, yt: np.ndarray, Xd: np.ndarray, yd: np.ndarray) -> Probe:
        rows, classes, weights = expand_scores(yt, lo, hi)
        return select(Xt[rows], classes, lambda p: _pearson(p.expected(Xd), yd),
                      weights=weights, fit_rows=_first_rows(rows, len(yt)), seed=seed)

    if dev is not None:
        return fit(X, y, *dev)
    tr, va = train_test_split(np.arange(len(y)), test_size=holdout, random_state=seed)
    probe = fit(X[tr], y[tr], X[va], y[va])
    rows, classes, weights = expand_scores(y, lo, hi)
    return refit(probe, X[rows], classes, weights, fit_rows=_first_rows(rows, len(y)), seed=seed)


def _first_rows(rows: np.ndarray, n: int) -> np.ndarray:
    """Positions in the expanded data of each original row's first copy."""
    values, first = np.unique(rows, return_index=True)
    assert len(values) == n  # every pair keeps at least one non-zero weight
    return first
