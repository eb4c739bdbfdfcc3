"""Nestedness: NODF (Almeida-Neto et al. 2008, Oikos 117:1227) and its weighted form WNODF.

Conventions (METHODS.md §1.3):

* Scale 0–100, as vegan and the paper. Non-zero entries are links.
* ``sort=True`` (default) first sorts rows and columns by decreasing fill, which equals vegan
  ``nestednodf(order = TRUE)`` ("NODF2" in bipartite) and makes NODF invariant to row and column
  permutations. ``sort=False`` applies the original definition to the matrix as presented (vegan
  ``order = FALSE``; a pair whose lower row has more links contributes 0).
* Decreasing fill: pairs with equal fill contribute 0.
* NODF is the mean over **all** row and column pairs together, not the mean of ``N_row`` and ``N_col``.
* Zero rows / columns follow vegan: they stay in the pair counts (denominators) and contribute 0.
  ``empty="drop"`` removes them first instead; the network analysis drops isolated nodes and says so.
* With fewer than two rows (columns) ``N_row`` (``N_col``) is NaN, as vegan's mean of nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

EmptyPolicy = Literal["keep", "drop"]


@dataclass(frozen=True)
class NODFResult:
    """NODF and its row and column parts, all on 0–100."""

    nodf: float
    n_row: float
    n_col: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def _drop_empty(W: NDArray[np.float64]) -> NDArray[np.float64]:
    keep_r = (W != 0).any(axis=1)
    keep_c = (W != 0).any(axis=0)
    return W[keep_r][:, keep_c]


def _paired_binary(X: NDArray[np.float64], sort: bool) -> NDArray[np.float64]:
    """N_paired (0–1) for all pairs of rows of binary ``X``; entry [i, j] is used for i < j."""
    k = X.sum(axis=1)
    overlap = X @ X.T
    if sort:
        # Order-invariant form: overlap / min(fill) for pairs of unequal fill (BiMat, tsakim/nestedness).
        lo = np.minimum(k[:, None], k[None, :])
        df = k[:, None] != k[None, :]
    else:
        # As presented: only an upper row i with strictly more links than the lower row j scores.
        lo = np.broadcast_to(k[None, :], overlap.shape)
        df = k[:, None] > k[None, :]
    ok = df & (lo > 0)
    return np.where(ok, overlap / np.where(lo > 0, lo, 1.0), 0.0)


def _paired_weighted(X: NDArray[np.float64], sort: bool) -> NDArray[np.float64]:
    """WNODF N_paired (0–1): share of j's links where i's weight is strictly larger, if fill_i > fill_j."""
    k = (X != 0).sum(axis=1)
    beats = ((X[:, None, :] > X[None, :, :]) & (X[None, :, :] > 0)).sum(axis=2)  # [i, j]: on j's links
    share = np.where(k[None, :] > 0, beats / np.maximum(k[None, :], 1), 0.0)
    if sort:
        # Sorting puts the fuller row of a pair on top, so each unordered pair scores in that direction.
        return np.where(k[:, None] > k[None, :], share, np.where(k[:, None] < k[None, :], share.T, 0.0))
    return np.where(k[:, None] > k[None, :], share, 0.0)


def _summarise(rows: NDArray[np.float64], cols: NDArray[np.float64]) -> NODFResult:
    """Means over the pairs i < j of the row and column N_paired matrices, on 0–100."""
    n_r, n_c = rows.shape[0] * (rows.shape[0] - 1) // 2, cols.shape[0] * (cols.shape[0] - 1) // 2
    s_r, s_c = float(np.triu(rows, 1).sum()), float(np.triu(cols, 1).sum())
    nan = float("nan")
    return NODFResult(
        nodf=100 * (s_r + s_c) / (n_r + n_c) if n_r + n_c else nan,
        n_row=100 * s_r / n_r if n_r else nan,
        n_col=100 * s_c / n_c if n_c else nan,
    )


def nodf(B: ArrayLike, sort: bool = True, empty: EmptyPolicy = "keep") -> NODFResult:
    """NODF of a binary (or binarised) matrix on 0–100; equals vegan ``nestednodf`` (``order = sort``).

    Args:
        B: Matrix; non-zero entries are links.
        sort: Sort rows and columns by decreasing fill first (vegan ``order = TRUE``, the default).
        empty: ``keep`` zero rows/columns in the pair counts (vegan) or ``drop`` them first.
    """
    X = (np.asarray(B) != 0).astype(float)
    if empty == "drop":
        X = _drop_empty(X)
    return _summarise(_paired_binary(X, sort), _paired_binary(X.T, sort))


def wnodf(W: ArrayLike, sort: bool = True, empty: EmptyPolicy = "keep") -> NODFResult:
    """Weighted NODF (Almeida-Neto & Ulrich 2011) on 0–100; equals vegan ``nestednodf(weighted = TRUE)``.

    Decreasing fill is judged on the number of links; a pair then scores the share of the lower row's
    links where the upper row's weight is strictly larger, so WNODF of a binary matrix is 0.
    """
    X = np.asarray(W, dtype=float)
    if empty == "drop":
        X = _drop_empty(X)
    return _summarise(_paired_weighted(X, sort), _paired_weighted(X.T, sort))
