"""Fitting many L2-regularised logistic regressions: the work behind every probe.

An evaluation fits dozens of small probes on one feature matrix (10 folds × 4 penalties for each
cross-validated task). Each probe p has its own row weights (0: not in its training part), its
own standardisation (mean, scale) and its own penalty C_p. The objective is scikit-learn's (mean
weighted cross-entropy plus ‖W‖² / (2·C·Σw), intercept unpenalised, one logit for two classes)
with soft targets allowed (score-distribution regression without duplicating rows), written out
in numpy with its gradient (float32 products, no autograd, no torch import) for scipy's L-BFGS.
Solvers: `lbfgs` fits one probe after another, in order of C, each warm-started from the one
before (the previous fold at the same C is close to the optimum); `batched` minimises the sum
of all objectives in one L-BFGS (the probes share no parameters, so its minimum is theirs, but
one line search for all makes it slower unless the probes are alike); `sklearn` — one
warm-started LogisticRegression per probe — is the reference both are checked against."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SOLVERS = ("lbfgs", "batched", "sklearn")
#: L-BFGS stops when every gradient entry of the (per-probe normalised) objective is this small.
TOLERANCE = 1e-4  # as scikit-learn's default tol
MAX_ITER = 500
SKLEARN_MAX_ITER = 300  # as when scikit-learn was the solver: the reference reproduces it


@dataclass
class Probe:
    """A fitted probe in standardised coordinates: scores are ((x − mean) / scale)·coef + bias.
    `coef` has one column for two classes (the logit of classes[1]), else one per class."""

    mean: np.ndarray  # [d]
    scale: np.ndarray  # [d]
    coef: np.ndarray  # [d, k]
    bias: np.ndarray  # [k]
    classes: np.ndarray  # [K] the labels the columns stand for
    C: float

    def scores(self, X: np.ndarray) -> np.ndarray:
        return ((X - self.mean) / self.scale) @ self.coef + self.bias

    def predict(self, X: np.ndarray) -> np.ndarray:
        z = self.scores(X)
        index = (z[:, 0] > 0).astype(np.int64) if z.shape[1] == 1 else np.argmax(z, axis=1)
        return self.classes[index]

    def proba(self, X: np.ndarray) -> np.ndarray:
        z = self.scores(X).astype(np.float64)
        if z.shape[1] == 1:
            z = np.concatenate([np.zeros_like(z), z], axis=1)
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def expected(self, X: np.ndarray) -> np.ndarray:
        """Expected class value under the predicted distribution (score-distribution regression)."""
        return self.proba(X) @ self.classes.astype(np.float64)


def standardiser(X: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and scale of X[rows] as StandardScaler computes them (scale 1 for a constant column)."""
    part = X[rows].astype(np.float64)
    mean, std = part.mean(axis=0), part.std(axis=0)
    return mean, np.where(std < 10 * np.finfo(np.float64).eps, 1.0, std)


@dataclass
class Batch:
    """P probes on one feature matrix X [n, d]. `targets` [n, K] is each row's distribution over
    `classes` (one-hot for labels; two grades for score-distribution regression), `weights`
    [P, n] says which rows train probe p (0: not in its training part); standardisation per
    probe [P, d]; penalties C [P]."""

    X: np.ndarray
    targets: np.ndarray
    classes: np.ndarray
    weights: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    C: np.ndarray


def fit(batch: Batch, solver: str = "lbfgs", init: list[Probe] | None = None) -> list[Probe]:
    """One probe per row of `batch.weights`; `init` (same length) warm-starts our solvers.

    BLAS runs on one thread here: these products are small, and two BLAS threads on a busy
    machine made the same fits many times slower (docs/benchmarks.md, "Evaluation: transfer,
    similarity and next-sentence retrieval")."""
    from threadpoolctl import threadpool_limits

    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; choose from {', '.join(SOLVERS)}")
    with threadpool_limits(1):
        if solver == "sklearn":
            return _fit_sklearn(batch)
        problem = _Problem(batch)
        if solver == "batched":
            theta = problem.solve(np.arange(len(batch.C)), init)
        else:
            theta = problem.solve_each(init)
        return problem.probes(theta)


class _Problem:
    """The probes of a batch as one objective over any subset of them (flat parameters: all
    coefficients [p, d, k], then all biases [p, k])."""

    def __init__(self, batch: Batch):
        self.batch = batch
        self.classes = batch.classes
        two = len(self.classes) == 2  # one logit, that of classes[1]
        self.k = 1 if two else len(self.classes)
        self.d = batch.mean.shape[1]
        self.X = np.ascontiguousarray(batch.X, dtype=np.float32)
        self.targets = (batch.targets[:, 1:] if two else batch.targets).astype(np.float32)
        self.total = batch.weights.sum(axis=1)  # Σw per probe
        self.inv_scale, self.shift = 1.0 / batch.scale, batch.mean / batch.scale  # [P, d]
        self.ridge = 1.0 / (batch.C * self.total)  # the penalty's gradient is W_p · ridge_p

    def objective(self, idx: np.ndarray) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
        """Sum of the objectives of probes `idx` and its gradient, as scipy wants them."""
        P, d, k, X, t = len(idx), self.d, self.k, self.X, self.targets
        w = (self.batch.weights[idx] / self.total[idx, None]).T.astype(np.float32)  # [n, P]
        inv_scale, shift, ridge = self.inv_scale[idx], self.shift[idx], self.ridge[idx]
        size = P * d * k

        def value_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
            W, b = theta[:size].reshape(P, d, k), theta[size:].reshape(P, k)
            # scores of probe p on raw x: x·(W_p / scale_p) + (b_p − (mean_p / scale_p)·W_p)
            raw = (W * inv_scale[:, :, None]).transpose(1, 0, 2).reshape(d, P * k)
            offset = b - np.einsum("pd,pdk->pk", shift, W)
            z = (X @ raw.astype(np.float32)).reshape(-1, P, k) + offset.astype(np.float32)
            if k == 1:  # log(1 + e^z) − t·z, its derivative σ(z) − t
                loss = np.logaddexp(0, z[..., 0]) - t * z[..., 0]
                dz = (1.0 / (1.0 + np.exp(-z[..., 0])) - t)[..., None]
            else:  # cross-entropy logsumexp(z) − t·z, its derivative softmax(z) − t
                top = z.max(axis=2, keepdims=True)
                e = np.exp(z - top)
                norm = e.sum(axis=2, keepdims=True)
                loss = (np.log(norm) + top)[..., 0] - np.einsum("npk,nk->np", z, t)
                dz = e / norm - t[:, None, :]
            dz *= w[..., None]  # [n, P, k]
            d_raw = (X.T @ dz.reshape(-1, P * k)).reshape(d, P, k).transpose(1, 0, 2)
            d_offset = dz.sum(axis=0, dtype=np.float64)  # [P, k]
            dW = d_raw * inv_scale[:, :, None] - shift[:, :, None] * d_offset[:, None, :]
            dW += W * ridge[:, None, None]
            value = (np.einsum("np,np->", w, loss, dtype=np.float64)
                     + 0.5 * np.einsum("p,pdk,pdk->", ridge, W, W))
            return float(value), np.concatenate([dW.ravel(), d_offset.ravel()])

        return value_grad

    def solve(self, idx: np.ndarray, init: list[Probe] | None) -> np.ndarray:
        """L-BFGS over probes `idx` together, started from `init` (one per index) or zeros;
        returns their parameters [P, d·k + k] (coefficients, bias)."""
        from scipy.optimize import minimize

        P, dk = len(idx), self.d * self.k
        if init is None:
            start = np.zeros(P * (dk + self.k))
        else:
            start = np.concatenate([np.stack([q.coef for q in init]).ravel(),
                                    np.stack([q.bias for q in init]).ravel()])
        result = minimize(self.objective(idx), start, jac=True, method="L-BFGS-B",
                          options={"maxiter": MAX_ITER, "gtol": TOLERANCE, "ftol": 1e-12,
                                   "maxcor": 20})
        x = result.x
        return np.concatenate([x[:P * dk].reshape(P, dk), x[P * dk:].reshape(P, self.k)], axis=1)

    def solve_each(self, init: list[Probe] | None) -> np.ndarray:
        """One L-BFGS per probe, in order of C: each starts from its `init`, else from the probe
        solved just before (the previous fold at the same C lies close to the optimum)."""
        out = np.zeros((len(self.batch.C), self.d * self.k + self.k))
        last = None
        for p in np.argsort(self.batch.C, kind="stable"):
            guess = [init[p]] if init is not None else ([last] if last is not None else None)
            out[p] = self.solve(np.array([p]), guess)[0]
            last = self._probe(p, out[p])
        return out

    def _probe(self, p: int, row: np.ndarray) -> Probe:
        b = self.batch
        dk = self.d * self.k
        return Probe(b.mean[p], b.scale[p], row[:dk].reshape(self.d, self.k), row[dk:],
                     self.classes, float(b.C[p]))

    def probes(self, theta: np.ndarray) -> list[Probe]:
        return [self._probe(p, theta[p]) for p in range(len(theta))]


def _fit_sklearn(batch: Batch) -> list[Probe]:
    """scikit-learn's L-BFGS per probe (the evaluation's solver before the lean L-BFGS); consecutive
    probes on the same rows and scaling reuse one model, warm-started along the penalties.
    A row with a spread target becomes one weighted row per class (Tai et al.'s expansion)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    rows, cls = np.nonzero(batch.targets > 0)  # one (row, class) per unit of target mass
    mass = batch.targets[rows, cls]
    probes: list[Probe] = []
    clf = None
    for p in range(len(batch.C)):
        keep = batch.weights[p][rows] > 0
        same = (p > 0 and clf is not None and np.array_equal(batch.weights[p], batch.weights[p - 1])
                and np.array_equal(batch.mean[p], batch.mean[p - 1]))
        if not same:
            clf = LogisticRegression(max_iter=SKLEARN_MAX_ITER, warm_start=True)
        assert clf is not None
        clf.set_params(C=float(batch.C[p]))
        Xs = (batch.X[rows[keep]] - batch.mean[p]) / batch.scale[p]
        with warnings.catch_warnings():
            # a probe stopped at MAX_ITER is still a fair probe; the warning would flood stderr
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(Xs, cls[keep], sample_weight=(batch.weights[p][rows] * mass)[keep])
        if not np.array_equal(clf.classes_, np.arange(len(batch.classes))):
            raise ValueError("every class needs training rows in every probe")
        probes.append(Probe(batch.mean[p], batch.scale[p], clf.coef_.T.copy(),
                            clf.intercept_.copy(), batch.classes, float(batch.C[p])))
    return probes
