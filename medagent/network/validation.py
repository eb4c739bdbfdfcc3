"""Design validation: the agent's hand-set choices against physicians' behaviour (Spearman's rho).

* Completeness weights vs the physicians' share of questions per category (paper: rho = 0.94).
* The agent's priority order vs the physicians' mean-position order (paper: rho = 0.08).

Conventions (METHODS.md §1.6): vectors are aligned **by category label**, never by position; orders are
compared as ranks with rank 1 = asked first (highest priority) in both; ties get average ranks; rho is the
Pearson correlation of the ranks. ``p_t`` is scipy's t approximation; ``p_exact`` is the exact permutation p
(all ``n!`` pairings, by dynamic programming over the integer statistic ``sum (2 r_x - 2 r_y)**2``) for
``n <= EXACT_MAX_N``; it is two-sided as ``2 * min(P(rho* <= rho), P(rho* >= rho))``, capped at 1.
Categories missing from either side (e.g. never asked) are left out and listed.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import spearmanr

from medagent.interview.order import Priorities

EXACT_MAX_N = 12


def average_ranks(x: ArrayLike) -> NDArray[np.float64]:
    """Ranks 1..n, ties sharing their average rank (R ``rank``, scipy ``rankdata``)."""
    a = np.asarray(x, dtype=float)
    order = np.argsort(a, kind="stable")
    ranks = np.empty(a.size)
    sa = a[order]
    i = 0
    while i < a.size:
        j = i
        while j + 1 < a.size and sa[j + 1] == sa[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman_rho(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson correlation of average ranks (NaN if either side is constant)."""
    rx, ry = average_ranks(x), average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = float(np.sqrt((rx**2).sum() * (ry**2).sum()))
    return float((rx * ry).sum() / den) if den else float("nan")


def exact_permutation_p(x: ArrayLike, y: ArrayLike) -> float:
    """Exact two-sided permutation p of Spearman's rho over all ``n!`` pairings (``n <= EXACT_MAX_N``).

    rho is a decreasing linear function of ``D = sum (a_i - b_pi(i))**2`` with ``a = 2 * ranks(x)`` and
    ``b = 2 * ranks(y)`` (integers even with ties), so counting pairings by ``D`` gives the null exactly.
    """
    a = np.rint(2 * average_ranks(x)).astype(np.int64)
    b = np.rint(2 * average_ranks(y)).astype(np.int64)
    n = a.size
    if n > EXACT_MAX_N:
        raise ValueError(f"exact p enumerates n! pairings; n={n} > {EXACT_MAX_N}")
    d_obs = int(((a - b) ** 2).sum())
    d_max = int(((np.sort(a) - np.sort(b)[::-1]) ** 2).sum())
    dp = np.zeros((1 << n, d_max + 1), dtype=np.int64)
    dp[0, 0] = 1
    # Masks in increasing order: every predecessor (fewer bits) is final before it is extended.
    for mask in range(1 << n):
        row = dp[mask]
        if not row.any():
            continue
        i = mask.bit_count()
        if i == n:
            continue
        for j in range(n):
            if mask & (1 << j):
                continue
            step = int((a[i] - b[j]) ** 2)
            dp[mask | (1 << j), step:] += row[: d_max + 1 - step]
    dist = dp[(1 << n) - 1]
    total = dist.sum()
    p_low_d = dist[: d_obs + 1].sum() / total  # small D = large rho
    p_high_d = dist[d_obs:].sum() / total
    return float(min(1.0, 2 * min(p_low_d, p_high_d)))


@dataclass(frozen=True)
class SpearmanResult:
    """rho of two label-aligned vectors, with both p-values and what was aligned."""

    rho: float
    p_t: float
    p_exact: float | None
    n: int
    labels: list[str]
    left_out: list[str] = field(default_factory=list)


def spearman_aligned(a: Mapping[Any, float], b: Mapping[Any, float], exact: bool = True) -> SpearmanResult:
    """Spearman's rho between two mappings aligned by key (keys with a missing or NaN value are left out)."""
    keys = [k for k in a if k in b and np.isfinite(a[k]) and np.isfinite(b[k])]
    left = sorted({str(k) for k in (*a, *b)} - {str(k) for k in keys})
    x = np.array([a[k] for k in keys], dtype=float)
    y = np.array([b[k] for k in keys], dtype=float)
    rho = spearman_rho(x, y) if len(keys) > 1 else float("nan")
    p_t = float(spearmanr(x, y).pvalue) if len(keys) > 2 and np.isfinite(rho) else float("nan")
    p_ex = exact_permutation_p(x, y) if exact and 2 < len(keys) <= EXACT_MAX_N and np.isfinite(rho) else None
    return SpearmanResult(rho, p_t, p_ex, len(keys), [str(k) for k in keys], left)


def order_ranks(order: Sequence[Hashable]) -> dict[Any, float]:
    """``{label: rank}`` with rank 1 = first in ``order``."""
    return {lab: float(i + 1) for i, lab in enumerate(order)}


def position_ranks(positions: Mapping[Any, float]) -> dict[Any, float]:
    """Average ranks of mean positions, rank 1 = earliest; NaN positions stay NaN (left out later)."""
    keys = [k for k, v in positions.items() if np.isfinite(v)]
    r = average_ranks([positions[k] for k in keys])
    out = {k: float("nan") for k in positions}
    out.update({k: float(v) for k, v in zip(keys, r, strict=True)})
    return out


def validate_design(
    shares: Mapping[str, float], positions: Mapping[str, float], priorities: Priorities
) -> dict[str, SpearmanResult]:
    """rho(weights, physicians' question shares) and rho(agent priority ranks, physicians' position ranks).

    Also compares the agent's order with the empirical order stored in the YAML (``order_vs_stored``).
    """
    agent_ranks = order_ranks(priorities.priority_order)
    return {
        "weights_vs_share": spearman_aligned(priorities.completeness_weights, shares),
        "order_vs_mean_position": spearman_aligned(agent_ranks, position_ranks(positions)),
        "order_vs_stored_empirical": spearman_aligned(agent_ranks, order_ranks(priorities.empirical_order)),
    }
