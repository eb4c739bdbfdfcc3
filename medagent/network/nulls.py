"""Null models, the NODF null distribution and the significance of Barber's Q (METHODS.md §1.3 pitfalls 7–9,
§1.2 pitfall 5).

Models (names as in vegan ``commsim``):

* ``r00``: the fill is kept, cells shuffled uniformly (no margin kept).
* ``r0`` / ``c0``: row (column) sums kept, links placed uniformly within each row (column).
* ``r1``: row sums kept, columns drawn without replacement with probability proportional to their fill
  (vegan ``r1``; successive sampling, done here with exponential keys, Efraimidis & Spirakis 2006).
* ``bascompte``: each cell independently with ``P_ij = (k_i / n_cols + d_j / n_rows) / 2`` (Bascompte et
  al. 2003 "null model 2"); margins kept only on average.
* ``curveball``: both margins kept exactly; a Markov chain of curveball trades between two random rows
  (Strona et al. 2014), uniform over fixed-fixed matrices; started from the observed matrix, ``burnin`` trades
  are discarded and ``thin`` trades separate two samples.

A batch of null NODF values is a pure function of ``(matrix, model, seed, count, burnin, thin)``
(``null_nodf_batch``), so batches can be fanned out to any executor (``map_fn``) with identical results.
Each batch of a sequential model is its own chain with its own burn-in.

Modularity significance (``modularity_null``): the same null matrices (``plan_batches`` / ``null_matrices``,
one model, default fixed-fixed ``curveball``) are each **optimised** by the same ``maximise_barber_q`` run as
the observed network (binary, same restarts and first seed), never scored with the observed partition, and the
observed best Q is compared with these best null Q values. "More modular than random" is ``p_greater``.

Summary conventions: ``z = (obs - mean) / sd`` with ``sd`` using ``n - 1`` (vegan ``oecosimu``), NaN when
``sd == 0``. ``p_less = (1 + #{sim <= obs}) / (n + 1)`` tests "less nested than the null" (the paper's
claim); ``p_greater = (1 + #{sim >= obs}) / (n + 1)`` tests "more nested".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from medagent.network.modularity import maximise_barber_q
from medagent.network.nestedness import nodf

NULL_MODELS = ("r00", "r0", "c0", "r1", "bascompte", "curveball")
SEQUENTIAL_MODELS = ("curveball",)
# Optimised Q values closer than this are ties (the ``hits`` tolerance of ``maximise_barber_q``).
Q_TOL = 1e-9

MapFn = Callable[[Callable[[Any], Any], Iterable[Any]], Iterable[Any]]


def _r1(X: NDArray[np.bool_], rng: np.random.Generator) -> NDArray[np.bool_]:
    k = X.sum(axis=1)
    w = X.sum(axis=0).astype(float)
    # Top-k of log(u) / w per row is a weighted draw without replacement (w = 0 columns never drawn).
    with np.errstate(divide="ignore"):
        keys = np.where(w > 0, np.log(rng.random(X.shape)) / np.where(w > 0, w, 1.0), -np.inf)
    rank = np.argsort(np.argsort(-keys, axis=1, kind="stable"), axis=1, kind="stable")
    return rank < k[:, None]


def _bascompte(X: NDArray[np.bool_], rng: np.random.Generator) -> NDArray[np.bool_]:
    n_r, n_c = X.shape
    p = (X.sum(axis=1)[:, None] / n_c + X.sum(axis=0)[None, :] / n_r) / 2
    return rng.random(X.shape) < p


def _curveball_steps(M: NDArray[np.bool_], steps: int, rng: np.random.Generator) -> None:
    """Runs ``steps`` curveball trades on ``M`` in place (row and column sums unchanged)."""
    n = M.shape[0]
    if n < 2 or steps <= 0:
        return
    a = rng.integers(n, size=steps)
    b = rng.integers(n - 1, size=steps)
    b = b + (b >= a)  # a != b
    for s in range(steps):
        ra, rb = M[a[s]], M[b[s]]
        idx = np.flatnonzero(ra != rb)  # columns held by exactly one of the two rows
        if idx.size < 2:
            continue
        n_a = int(np.count_nonzero(ra[idx]))
        if n_a == 0 or n_a == idx.size:
            continue
        new_a = rng.permutation(idx.size) < n_a
        M[a[s], idx] = new_a
        M[b[s], idx] = ~new_a


def null_matrices(
    B: ArrayLike, model: str, seed: int | tuple[int, ...], count: int, burnin: int = 10_000, thin: int = 100
) -> Iterator[NDArray[np.bool_]]:
    """Yields ``count`` null matrices of ``model`` for binary(-ised) ``B``; deterministic for ``seed``.

    ``burnin`` and ``thin`` apply to sequential models (``curveball``) only.
    """
    if model not in NULL_MODELS:
        raise ValueError(f"unknown null model {model!r}; expected one of {NULL_MODELS}")
    X = np.asarray(B) != 0
    rng = np.random.default_rng(seed)
    if model == "curveball":
        M = X.copy()
        _curveball_steps(M, burnin, rng)
        for _ in range(count):
            _curveball_steps(M, thin, rng)
            yield M.copy()
        return
    for _ in range(count):
        if model == "r00":
            yield rng.permutation(X.ravel()).reshape(X.shape)
        elif model == "r0":
            yield rng.permuted(X, axis=1)
        elif model == "c0":
            yield rng.permuted(X, axis=0)
        elif model == "r1":
            yield _r1(X, rng)
        else:
            yield _bascompte(X, rng)


@dataclass(frozen=True)
class NullBatch:
    """One unit of null-sample work: a pure function of its fields (see ``null_nodf_batch``)."""

    matrix: NDArray[np.bool_]
    model: str
    seed: tuple[int, ...]
    count: int
    burnin: int = 10_000
    thin: int = 100
    sort: bool = True


def null_nodf_batch(batch: NullBatch) -> NDArray[np.float64]:
    """NODF (0–100) of ``batch.count`` null matrices; the unit that executors fan out."""
    mats = null_matrices(batch.matrix, batch.model, batch.seed, batch.count, batch.burnin, batch.thin)
    return np.array([nodf(M, sort=batch.sort).nodf for M in mats], dtype=float)


def plan_batches(
    B: ArrayLike,
    model: str,
    n: int,
    seed: int,
    batch_size: int,
    burnin: int = 10_000,
    thin: int = 100,
    sort: bool = True,
) -> list[NullBatch]:
    """Splits ``n`` samples into batches of at most ``batch_size``; batch ``i`` is seeded ``(seed, i)``."""
    if n < 1 or batch_size < 1:
        raise ValueError(f"n={n} and batch_size={batch_size} must be positive")
    X = np.asarray(B) != 0
    sizes = [batch_size] * (n // batch_size) + ([n % batch_size] if n % batch_size else [])
    return [NullBatch(X, model, (seed, i), c, burnin, thin, sort) for i, c in enumerate(sizes)]


@dataclass(frozen=True)
class NullSummary:
    """Observed statistic against a null distribution (see the module docstring for conventions)."""

    model: str
    obs: float
    n: int
    mean: float
    sd: float
    z: float
    p_less: float
    p_greater: float
    samples: NDArray[np.float64] = field(repr=False, compare=False)

    @property
    def degenerate(self) -> bool:
        """True when the comparison says nothing: the nulls do not vary (sd 0, e.g. every null NODF 0) or
        the observed statistic is 0 with nulls all 0; z is then undefined and the p-values are ties."""
        return bool(self.n == 0 or not self.sd > 0 or (self.obs == 0 and not np.any(self.samples)))

    def to_dict(self) -> dict[str, Any]:
        keys = ("model", "obs", "n", "mean", "sd", "z", "p_less", "p_greater", "degenerate")
        return {k: getattr(self, k) for k in keys}


def summarise_null(obs: float, samples: ArrayLike, model: str = "", tol: float = 0.0) -> NullSummary:
    """Mean, sd (ddof=1), z and both one-sided empirical p-values of ``obs`` against ``samples``.

    ``tol`` absorbs floating-point noise: samples within ``tol`` of ``obs`` count as ties (in both p-values)
    and ``sd <= tol`` as 0 (z NaN). NODF uses 0; Q uses 1e-9, as the optimised Q of equivalent networks can
    differ in the last bits.
    """
    s = np.asarray(samples, dtype=float)
    n = int(s.size)
    mean = float(s.mean()) if n else float("nan")
    sd = float(s.std(ddof=1)) if n > 1 else float("nan")
    z = (obs - mean) / sd if sd > tol and np.isfinite(sd) else float("nan")
    return NullSummary(
        model=model,
        obs=float(obs),
        n=n,
        mean=mean,
        sd=sd,
        z=float(z),
        p_less=float((1 + np.sum(s <= obs + tol)) / (n + 1)),
        p_greater=float((1 + np.sum(s >= obs - tol)) / (n + 1)),
        samples=s,
    )


def nodf_null(
    B: ArrayLike,
    model: str,
    n: int = 999,
    seed: int = 0,
    *,
    batch_size: int = 250,
    burnin: int = 10_000,
    thin: int = 100,
    sort: bool = True,
    map_fn: MapFn = map,
) -> NullSummary:
    """Observed NODF of ``B`` against ``n`` samples of a null ``model``.

    Args:
        B: Observed matrix (non-zero = link).
        model: One of ``NULL_MODELS``.
        n: Number of null samples.
        seed: Root seed; batch ``i`` uses ``(seed, i)``, so results do not depend on ``map_fn``.
        batch_size: Samples per batch (each curveball batch is a chain with its own burn-in).
        burnin: Curveball trades discarded before the first sample of each batch.
        thin: Curveball trades between samples.
        sort: NODF ordering convention (``nodf(sort=...)``) for the observed and null matrices.
        map_fn: ``map``-like executor, e.g. one that runs each batch as a Ray task.
    """
    batches = plan_batches(B, model, n, seed, batch_size, burnin, thin, sort)
    samples = np.concatenate([np.asarray(x, dtype=float) for x in map_fn(null_nodf_batch, batches)])
    return summarise_null(nodf(B, sort=sort).nodf, samples, model)


@dataclass(frozen=True)
class QNullBatch:
    """One unit of modularity-null work: the matrices of ``nulls``, each optimised like the observed network.

    Every null matrix is optimised by ``maximise_barber_q(weighted=False, restarts=restarts, seed=opt_seed)``,
    so the batch is a pure function of its fields.
    """

    nulls: NullBatch
    restarts: int = 50
    opt_seed: int = 0


def null_q_batch(batch: QNullBatch) -> NDArray[np.float64]:
    """Best Barber Q of each of the ``batch.nulls.count`` null matrices; the unit that executors fan out."""
    b = batch.nulls
    mats = null_matrices(b.matrix, b.model, b.seed, b.count, b.burnin, b.thin)
    return np.array(
        [maximise_barber_q(M, weighted=False, restarts=batch.restarts, seed=batch.opt_seed).Q for M in mats],
        dtype=float,
    )


def modularity_null(
    B: ArrayLike,
    model: str = "curveball",
    n: int = 99,
    seed: int = 0,
    *,
    restarts: int = 50,
    opt_seed: int = 0,
    obs: float | None = None,
    batch_size: int = 10,
    burnin: int = 10_000,
    thin: int = 100,
    map_fn: MapFn = map,
) -> NullSummary:
    """Observed Barber Q of binary(-ised) ``B`` against the optimised Q of ``n`` null networks of ``model``.

    Args:
        B: Observed matrix (non-zero = link).
        model: One of ``NULL_MODELS``; null matrices as for NODF (``plan_batches``, batch ``i`` seeded
            ``(seed, i)``), so results do not depend on ``map_fn``.
        n: Number of null networks.
        seed: Root seed of the null matrices.
        restarts: Leiden restarts per network (the observed network's count: the same optimisation).
        opt_seed: First optimiser seed, the same for every null network and the observed one.
        obs: Observed Q when already computed by ``maximise_barber_q(B, weighted=False, restarts=restarts,
            seed=opt_seed)``; None computes it.
        batch_size: Null networks per batch (one executor task; each curveball batch is its own chain).
        burnin: Curveball trades discarded before the first sample of each batch.
        thin: Curveball trades between samples.
        map_fn: ``map``-like executor, e.g. one that runs each batch as a Ray task.

    Returns:
        ``NullSummary`` of the best null Q values; ``p_greater`` is the empirical p of "more modular than
        the null", ``z = (obs - mean) / sd``.
    """
    if obs is None:
        obs = maximise_barber_q(B, weighted=False, restarts=restarts, seed=opt_seed).Q
    batches = [
        QNullBatch(b, restarts, opt_seed) for b in plan_batches(B, model, n, seed, batch_size, burnin, thin)
    ]
    samples = np.concatenate([np.asarray(x, dtype=float) for x in map_fn(null_q_batch, batches)])
    return summarise_null(obs, samples, model, tol=Q_TOL)
