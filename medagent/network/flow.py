"""The questioning-flow network G_Q, category positions and the two empirical phases.

Conventions:

* Transitions are counted within each interview only (never from the last question of one interview to
  the first of the next). The self-loop policy is the caller's (``markov.prepare``).
* Each edge carries ``count`` (raw transitions) and ``weight`` = ``count / N(c)``, the row-normalised
  probability (out-weights of a category sum to 1).
* Relative position of question ``t`` (0-based) of an interview with ``T`` questions is ``(t + 0.5) / T``
  (the midpoint of its slot, so a one-question interview sits at 0.5 and both ends are treated alike).
* Mean-position order: categories ranked by the mean relative position of their questions (``which="all"``)
  or of the first question of the category in each interview where it occurs (``which="first"``); rank 1 =
  earliest.
* Two phases: every cut ``tau`` of a grid splits each interview into questions with relative position
  below / at or above ``tau``; the cut maximising the mutual information between phase and category (in
  nats) wins, and each category goes to the phase where its share relative to its overall share is higher.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np
from numpy.typing import NDArray
from scipy.special import rel_entr

from medagent.interview.order import relative_positions


def transition_counts(seqs: Sequence[Sequence[Hashable]], states: Sequence[Hashable]) -> NDArray[np.int64]:
    """``(S, S)`` matrix of within-interview transitions ``from -> to`` (rows = from)."""
    idx = {s: i for i, s in enumerate(states)}
    M = np.zeros((len(states), len(states)), dtype=np.int64)
    for seq in seqs:
        for a, b in zip(seq[:-1], seq[1:], strict=True):
            M[idx[a], idx[b]] += 1
    return M


def flow_network(seqs: Sequence[Sequence[Hashable]], states: Sequence[Hashable]) -> nx.DiGraph:
    """Directed flow network over ``states`` with ``count`` and row-normalised ``weight`` on each edge.

    Every state is a node (also those never visited), with ``visits`` = its number of questions.
    """
    M = transition_counts(seqs, states)
    G = nx.DiGraph()
    visits = {s: 0 for s in states}
    for seq in seqs:
        for x in seq:
            visits[x] += 1
    for s in states:
        G.add_node(s, visits=visits[s])
    out = M.sum(axis=1)
    for i, a in enumerate(states):
        for j, b in enumerate(states):
            if M[i, j]:
                G.add_edge(a, b, count=int(M[i, j]), weight=float(M[i, j] / out[i]))
    return G


def category_shares(seqs: Sequence[Sequence[Hashable]], states: Sequence[Hashable]) -> dict[Hashable, float]:
    """Share of all physician questions in each category (the physicians' attention)."""
    counts = {s: 0 for s in states}
    for seq in seqs:
        for x in seq:
            counts[x] += 1
    total = sum(counts.values())
    return {s: (c / total if total else float("nan")) for s, c in counts.items()}


@dataclass(frozen=True)
class Phases:
    """The best two-phase split: cut, information, per-category shares and phase assignment."""

    tau: float
    mutual_information: float
    share_early: dict[Hashable, float]
    share_late: dict[Hashable, float]
    phase: dict[Hashable, int]
    grid_mi: list[tuple[float, float]]


def two_phases(
    seqs: Sequence[Sequence[Hashable]],
    states: Sequence[Hashable],
    grid: Sequence[float] | None = None,
) -> Phases:
    """Splits interviews into an early and a late phase at the cut that best separates categories.

    Args:
        seqs: One category sequence per interview.
        states: The categories.
        grid: Candidate cuts in (0, 1); default 0.10, 0.15, ..., 0.90.
    """
    cuts = list(grid) if grid is not None else [round(x, 2) for x in np.arange(0.10, 0.901, 0.05)]
    idx = {s: i for i, s in enumerate(states)}
    pos = np.concatenate([relative_positions(s) for s in seqs]) if seqs else np.zeros(0)
    cat = np.array([idx[x] for s in seqs for x in s], dtype=np.int64)
    S = len(states)
    scores: list[tuple[float, float]] = []
    best: tuple[float, float, NDArray[np.float64]] | None = None
    for tau in cuts:
        late = pos >= tau
        J = np.zeros((2, S))
        np.add.at(J, (late.astype(int), cat), 1.0)
        if J.sum() == 0:
            continue
        J /= J.sum()
        indep = J.sum(axis=1, keepdims=True) * J.sum(axis=0, keepdims=True)
        mi = float(rel_entr(J, np.where(indep > 0, indep, 1.0)).sum())
        scores.append((float(tau), mi))
        if best is None or mi > best[1] + 1e-15:
            best = (float(tau), mi, J)
    if best is None:
        nan = float("nan")
        return Phases(nan, nan, {}, {}, {}, scores)
    tau, mi, J = best
    rows = J.sum(axis=1, keepdims=True)
    shares = np.divide(J, rows, out=np.zeros_like(J), where=rows > 0)
    phase = {s: int(shares[1, i] > shares[0, i]) + 1 for s, i in idx.items() if J[:, i].sum() > 0}
    return Phases(
        tau=tau,
        mutual_information=mi,
        share_early={s: float(shares[0, i]) for s, i in idx.items()},
        share_late={s: float(shares[1, i]) for s, i in idx.items()},
        phase=phase,
        grid_mi=scores,
    )


def phase_null(
    seqs: Sequence[Sequence[Hashable]], states: Sequence[Hashable], n: int, seed: int = 0
) -> tuple[float, NDArray[np.float64]]:
    """The best cut's mutual information against a **shuffled-position null**: each interview's categories
    are permuted within the interview (its mix of categories kept, their order lost) and the best cut is
    searched again, ``n`` times. Returns the observed MI and the null MIs (``nulls.summarise_null`` gives
    p = (1 + #null >= obs) / (n + 1)); a split that only reflects which categories an interview holds, not
    when they are asked, is then no better than its null."""
    rng = np.random.default_rng(seed)
    obs = two_phases(seqs, states).mutual_information
    null = np.array(
        [
            two_phases(
                [list(rng.permutation(np.asarray(s, dtype=object))) for s in seqs], states
            ).mutual_information
            for _ in range(n)
        ],
        dtype=float,
    )
    return obs, null
