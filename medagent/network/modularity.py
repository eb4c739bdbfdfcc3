"""Barber bipartite modularity (Barber 2007, PRE 76:066102) and its maximisation.

``barber_q`` is the single source of truth for Q: every Q we report, whatever produced the partition, is
recomputed by it. Weighted matrices use strengths in place of degrees (Dormann & Strauss 2014).

Conventions (METHODS.md §1.2):

* Q is **not** Newman's modularity of the bipartite graph (whose null model expects same-type edges);
  ``networkx.community.modularity`` and scikit-network's ``get_modularity`` return Newman's value.
* The module count counts the modules holding at least one row and one column with links; nodes without
  links (e.g. left isolated by link validation) are not modules (the analysis drops them before optimising),
  nor are groups of one node type (they hold no link and add 0 to Q).
* The optimiser is stochastic: ``maximise_barber_q`` runs many seeded restarts and keeps the best partition,
  so its Q is a lower bound on the maximum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray


def _codes(labels: Sequence[Any] | NDArray[Any], universe: list[Any]) -> NDArray[np.int64]:
    index = {lab: i for i, lab in enumerate(universe)}
    return np.array([index[lab] for lab in labels], dtype=np.int64)


def _shared_universe(row_labels: Sequence[Any], col_labels: Sequence[Any]) -> list[Any]:
    seen: dict[Any, None] = {}
    for lab in [*row_labels, *col_labels]:
        seen.setdefault(lab, None)
    return list(seen)


def barber_q(B: ArrayLike, row_labels: Sequence[Any], col_labels: Sequence[Any]) -> float:
    """Barber's bipartite modularity of a partition.

    ``Q = sum_c [ L_c / m - K_c * D_c / m**2 ]`` with ``m`` the total weight, ``L_c`` the weight inside
    module ``c`` and ``K_c`` / ``D_c`` the row / column degree (strength) sums of module ``c``.

    Args:
        B: Biadjacency matrix (rows × columns), binary or weighted (non-negative).
        row_labels: Module of each row (any hashable labels; a row and a column share a module when
            their labels are equal).
        col_labels: Module of each column.

    Returns:
        Q in ``[-1, 1 - 1/c]``; 0.0 for an empty matrix.
    """
    W = np.asarray(B, dtype=float)
    if W.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix {W.shape} does not match {len(row_labels)} rows × {len(col_labels)} cols")
    m = W.sum()
    if m == 0:
        return 0.0
    universe = _shared_universe(row_labels, col_labels)
    R = np.eye(len(universe))[_codes(row_labels, universe)]  # rows × modules one-hot
    C = np.eye(len(universe))[_codes(col_labels, universe)]  # cols × modules one-hot
    L = np.einsum("ic,ij,jc->c", R, W, C)
    K = W.sum(axis=1) @ R
    D = W.sum(axis=0) @ C
    return float(np.sum(L / m - K * D / m**2))


def count_modules(B: ArrayLike, row_labels: Sequence[Any], col_labels: Sequence[Any]) -> int:
    """Number of modules holding at least one row **and** one column that have links.

    Isolated nodes are no module, and neither is a group of nodes of one type only: it holds no link and
    adds 0 to Q, so such a split ties with merging it anywhere (e.g. a single biclique split into singletons).
    """
    W = np.asarray(B) != 0
    rows = {lab for lab, k in zip(row_labels, W.sum(axis=1), strict=True) if k > 0}
    cols = {lab for lab, k in zip(col_labels, W.sum(axis=0), strict=True) if k > 0}
    return len(rows & cols)


@dataclass(frozen=True)
class Partition:
    """A bipartite partition and its Barber Q (recomputed by ``barber_q``).

    Attributes:
        row_labels: Module index of each row (0-based, renumbered by first appearance).
        col_labels: Module index of each column.
        Q: Barber modularity.
        modules: ``count_modules`` of the partition.
        restarts: Restarts run; ``hits`` of them reached ``Q`` (within 1e-9).
    """

    row_labels: tuple[int, ...]
    col_labels: tuple[int, ...]
    Q: float
    modules: int
    restarts: int = 1
    hits: int = 1


def _renumber(labels: Sequence[int]) -> list[int]:
    seen: dict[int, int] = {}
    return [seen.setdefault(lab, len(seen)) for lab in labels]


def _leiden_membership(W: NDArray[np.float64], seed: int) -> list[int]:
    """One Leiden run of the three-layer CPM construction whose quality is proportional to Barber's Q.

    Layer 1 is the bipartite graph with node sizes equal to strengths and resolution 1/m; layers 2 and 3 are
    empty graphs whose node sizes are the row (resp. column) strengths only, weighted -1. CPM penalises
    ``binom(K_c + D_c, 2)``; subtracting ``binom(K_c, 2)`` and ``binom(D_c, 2)`` leaves ``K_c * D_c``, so the
    combined quality is a positive multiple of Q_B for weighted and binary matrices alike. (leidenalg's
    ``CPMVertexPartition.Bipartite`` uses unweighted degrees and is wrong for weighted B.)
    """
    import igraph as ig
    import leidenalg

    n_r, n_c = W.shape
    m = float(W.sum())
    ri, ci = np.nonzero(W)
    g = ig.Graph(n=n_r + n_c, edges=list(zip(ri.tolist(), (ci + n_r).tolist(), strict=True)))
    weights = W[ri, ci].tolist()
    strength = np.concatenate([W.sum(axis=1), W.sum(axis=0)])
    rows_only = np.concatenate([W.sum(axis=1), np.zeros(n_c)])
    cols_only = np.concatenate([np.zeros(n_r), W.sum(axis=0)])
    empty = ig.Graph(n=n_r + n_c)
    gamma = 1.0 / m
    layers = [
        leidenalg.CPMVertexPartition(
            g, weights=weights, node_sizes=strength.tolist(), resolution_parameter=gamma
        ),
        leidenalg.CPMVertexPartition(empty, node_sizes=rows_only.tolist(), resolution_parameter=gamma),
        leidenalg.CPMVertexPartition(empty, node_sizes=cols_only.tolist(), resolution_parameter=gamma),
    ]
    opt = leidenalg.Optimiser()
    opt.set_rng_seed(seed)
    # n_iterations=-1 iterates until no move improves the quality.
    opt.optimise_partition_multiplex(layers, layer_weights=[1, -1, -1], n_iterations=-1)
    return list(layers[0].membership)


def maximise_barber_q(B: ArrayLike, *, weighted: bool = True, restarts: int = 50, seed: int = 0) -> Partition:
    """Best Barber partition over ``restarts`` seeded Leiden runs (leidenalg, three-layer CPM).

    Args:
        B: Biadjacency matrix. Rows or columns without links are allowed; they end up alone in their own
            label and are not counted as modules.
        weighted: Use the weights of ``B``; False binarises it (non-zero = link) first.
        restarts: Independent runs with seeds ``seed, seed + 1, ...``; the best Q is kept (on a tie, the
            partition with fewer distinct labels, then the first).
        seed: First seed.

    Returns:
        The best partition; its Q is computed by ``barber_q``, never taken from the optimiser.
    """
    W = np.asarray(B, dtype=float)
    if not weighted:
        W = (W != 0).astype(float)
    if (W < 0).any():
        raise ValueError("Barber modularity needs non-negative weights")
    n_r = W.shape[0]
    if W.sum() == 0:
        rows, cols = list(range(n_r)), list(range(n_r, n_r + W.shape[1]))
        return Partition(tuple(rows), tuple(cols), 0.0, 0, restarts, restarts)
    # The one-module partition (Q = 0) is always a candidate: a single biclique has Q = 0 at best, and Leiden
    # then stops at singletons because no move changes the quality.
    best: tuple[float, list[int]] | None = (0.0, [0] * (n_r + W.shape[1]))
    qs = []
    for r in range(max(1, restarts)):
        membership = _renumber(_leiden_membership(W, seed + r))
        q = barber_q(W, membership[:n_r], membership[n_r:])
        qs.append(q)
        # Higher Q wins; on a tie (within 1e-12) the partition with fewer distinct labels.
        if (
            best is None
            or q > best[0] + 1e-12
            or (abs(q - best[0]) <= 1e-12 and len(set(membership)) < len(set(best[1])))
        ):
            best = (q, membership)
    assert best is not None
    q, membership = best
    rows_l, cols_l = membership[:n_r], membership[n_r:]
    return Partition(
        row_labels=tuple(rows_l),
        col_labels=tuple(cols_l),
        Q=q,
        modules=count_modules(W, rows_l, cols_l),
        restarts=max(1, restarts),
        hits=int(sum(abs(x - q) <= 1e-9 for x in qs)),
    )


def newman_q_bipartite(B: ArrayLike, row_labels: Sequence[Any], col_labels: Sequence[Any]) -> float:
    """Newman's modularity of the same partition on the bipartite graph (contrast only; never reported as Q_B).

    ``Q_N = (1/m) sum_c L_c - sum_c (K_c + D_c)**2 / (4 m**2)``, which is ``<= Q_B``.
    """
    W = np.asarray(B, dtype=float)
    m = W.sum()
    if m == 0:
        return 0.0
    universe = _shared_universe(row_labels, col_labels)
    R = np.eye(len(universe))[_codes(row_labels, universe)]
    C = np.eye(len(universe))[_codes(col_labels, universe)]
    L = np.einsum("ic,ij,jc->c", R, W, C)
    K = W.sum(axis=1) @ R
    D = W.sum(axis=0) @ C
    return float(np.sum(L) / m - np.sum((K + D) ** 2) / (4 * m**2))
