"""Markov chains of question categories: order selection and cross-validated next-category accuracy.

Conventions (METHODS.md §1.7 and §3), each a parameter where the paper leaves it open:

* **Interview boundaries.** Counts are pooled over interviews; no transition crosses from one interview to
  the next (sequences are never concatenated).
* **Self-transitions.** ``self_loops="keep"`` keeps consecutive questions of one category as self-loops;
  ``"collapse"`` first merges each run into one visit (``collapse_runs``).
* **Same targets for every order.** Log-likelihoods are evaluated on the positions ``t >= start`` (0-based)
  of every interview, the earlier ones serving only as context; ``start`` defaults to the largest order
  ``K_max``. ``n = sum_i max(0, T_i - start)`` is the ``n`` of BIC. logL is then non-decreasing in the order.
* **Parameters.** ``npar_full = S**k * (S - 1)`` for ``S`` states (given, e.g. the 11 MediTOD categories,
  or the states observed); ``npar_observed = sum over observed contexts (distinct successors - 1)``
  (Berchtold & Raftery 2002). AIC = -2 logL + 2p; BIC = -2 logL + p ln n; both reported for both counts.
* **Cross-validation.** Folds by interview (never by transition). Order-k counts are fitted on every
  position of the training interviews that has k predecessors; a held-out target is predicted as the most
  frequent successor of its context, backing off to order k-1, ... 0 when the context is unseen, ties going
  to the state listed first in ``states``. Every order is scored on the same held-out targets ``t >= start``
  (so the first ``start`` questions of an interview are not scored). Accuracy = correct / all targets.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.stats import chi2

SELF_LOOP_POLICIES = ("keep", "collapse")
Counts = dict[tuple[Hashable, ...], Counter[Hashable]]


def collapse_runs(seq: Sequence[Hashable]) -> list[Hashable]:
    """Merges consecutive repeats: ``AABAC -> ABAC``."""
    return [x for i, x in enumerate(seq) if i == 0 or x != seq[i - 1]]


def prepare(seqs: Sequence[Sequence[Hashable]], self_loops: str = "keep") -> list[list[Hashable]]:
    """Applies the self-loop policy to every interview's sequence."""
    if self_loops not in SELF_LOOP_POLICIES:
        raise ValueError(f"self_loops must be one of {SELF_LOOP_POLICIES}, not {self_loops!r}")
    return [collapse_runs(s) if self_loops == "collapse" else list(s) for s in seqs]


def context_counts(seqs: Sequence[Sequence[Hashable]], order: int, start: int | None = None) -> Counts:
    """``N(c, j)`` for contexts of length ``order`` and targets at positions ``t >= start`` of each sequence.

    ``start`` defaults to ``order`` (every position that has a full context).
    """
    s0 = order if start is None else start
    if s0 < order:
        raise ValueError(f"start={s0} leaves order-{order} targets without a full context")
    counts: Counts = defaultdict(Counter)
    for seq in seqs:
        for t in range(s0, len(seq)):
            counts[tuple(seq[t - order : t])][seq[t]] += 1
    return dict(counts)


def loglik(counts: Counts) -> float:
    """Maximum-likelihood log-likelihood ``sum N(c, j) log(N(c, j) / N(c))`` (natural log)."""
    total = 0.0
    for succ in counts.values():
        n_c = sum(succ.values())
        total += sum(n * math.log(n / n_c) for n in succ.values())
    return total


def npar_full(n_states: int, order: int) -> int:
    """Free parameters of a full order-k chain: ``S**k * (S - 1)``."""
    return n_states**order * (n_states - 1)


def npar_observed(counts: Counts) -> int:
    """Free parameters actually estimated: per observed context, distinct successors minus one."""
    return sum(len(succ) - 1 for succ in counts.values())


@dataclass(frozen=True)
class OrderFit:
    """Fit of one order on the common targets."""

    order: int
    loglik: float
    npar_full: int
    npar_observed: int
    aic_full: float
    bic_full: float
    aic_observed: float
    bic_observed: float
    lr_g2: float | None = None
    lr_df_full: int | None = None
    lr_p_full: float | None = None


@dataclass(frozen=True)
class OrderSelection:
    """Orders 0..K fitted on the same ``n`` targets; ``selected`` maps criterion -> order of minimum."""

    fits: list[OrderFit]
    n: int
    start: int
    n_states: int
    selected: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def select_order(
    seqs: Sequence[Sequence[Hashable]],
    max_order: int = 3,
    *,
    n_states: int | None = None,
    start: int | None = None,
) -> OrderSelection:
    """Log-likelihood, parameters (full and observed), AIC, BIC and LR tests for orders ``0..max_order``.

    Args:
        seqs: One state sequence per interview (already through ``prepare``).
        max_order: Largest order ``K_max``.
        n_states: ``S`` for the full parameter count; defaults to the number of distinct states observed.
        start: First target position (0-based) of every sequence; default ``max_order``. Berchtold &
            Raftery's tables condition on the first 14 observations (``start=14``).
    """
    s0 = max_order if start is None else start
    S = n_states if n_states is not None else len({x for s in seqs for x in s})
    n = sum(max(0, len(s) - s0) for s in seqs)
    fits: list[OrderFit] = []
    for k in range(max_order + 1):
        c = context_counts(seqs, k, s0)
        ll, pf, po = loglik(c), npar_full(S, k), npar_observed(c)
        lr: dict[str, Any] = {}
        if fits:
            prev = fits[-1]
            g2 = 2 * (ll - prev.loglik)
            df = pf - prev.npar_full
            lr = {"lr_g2": g2, "lr_df_full": df, "lr_p_full": float(chi2.sf(g2, df)) if df > 0 else None}
        ln_n = math.log(n) if n > 0 else float("nan")
        fits.append(
            OrderFit(
                order=k,
                loglik=ll,
                npar_full=pf,
                npar_observed=po,
                aic_full=-2 * ll + 2 * pf,
                bic_full=-2 * ll + pf * ln_n,
                aic_observed=-2 * ll + 2 * po,
                bic_observed=-2 * ll + po * ln_n,
                **lr,
            )
        )
    selected = {
        crit: _argmin_order(fits, crit) for crit in ("aic_full", "bic_full", "aic_observed", "bic_observed")
    }
    return OrderSelection(fits=fits, n=n, start=s0, n_states=S, selected=selected)


def _argmin_order(fits: list[OrderFit], criterion: str) -> int:
    """Order with the smallest criterion value (the lower order on a tie)."""
    return min(fits, key=lambda f: (float(getattr(f, criterion)), f.order)).order


def _argmax(succ: Counter[Hashable], rank: dict[Hashable, int]) -> Hashable:
    # Highest count; ties to the state listed first (unknown states last, then by repr for determinism).
    return min(succ, key=lambda s: (-succ[s], rank.get(s, len(rank)), repr(s)))


def predict_next(
    history: Sequence[Hashable], models: list[Counts], order: int, rank: dict[Hashable, int]
) -> Hashable:
    """Most frequent successor of the last ``order`` states, backing off to shorter contexts when unseen."""
    for k in range(order, -1, -1):
        succ = models[k].get(tuple(history[len(history) - k :]) if k else ())
        if succ:
            return _argmax(succ, rank)
    raise ValueError("no training data: the order-0 model is empty")


@dataclass(frozen=True)
class CVResult:
    """Cross-validated next-category accuracy per order (micro average over held-out targets)."""

    accuracy: dict[int, float]
    n_targets: int
    n_folds: int
    start: int
    backoffs: dict[int, int]


def fold_assignment(n_seqs: int, n_folds: int | None, seed: int = 0) -> np.ndarray:
    """Fold of each interview: a seeded shuffle dealt round-robin; ``None`` = leave-one-interview-out."""
    k = n_seqs if n_folds is None else min(n_folds, n_seqs)
    folds = np.empty(n_seqs, dtype=np.int64)
    folds[np.random.default_rng(seed).permutation(n_seqs)] = np.arange(n_seqs) % max(k, 1)
    return folds


def cv_accuracy(
    seqs: Sequence[Sequence[Hashable]],
    max_order: int = 3,
    *,
    states: Sequence[Hashable] | None = None,
    n_folds: int | None = 10,
    seed: int = 0,
    start: int | None = None,
) -> CVResult:
    """Next-category accuracy of orders ``0..max_order`` with folds by interview (see module docstring).

    Args:
        seqs: One sequence per interview.
        max_order: Largest order.
        states: Tie-breaking order (first listed wins); default: sorted observed states.
        n_folds: Number of folds (capped at the number of interviews); None for leave-one-interview-out.
        seed: Seed of the fold assignment.
        start: First scored position; default ``max_order``.
    """
    s0 = max_order if start is None else start
    rank = {
        s: i
        for i, s in enumerate(
            states if states is not None else sorted({x for s in seqs for x in s}, key=repr)
        )
    }
    folds = fold_assignment(len(seqs), n_folds, seed)
    correct = dict.fromkeys(range(max_order + 1), 0)
    backoffs = dict.fromkeys(range(max_order + 1), 0)
    total = 0
    for f in np.unique(folds):
        train = [s for s, g in zip(seqs, folds, strict=True) if g != f]
        test = [s for s, g in zip(seqs, folds, strict=True) if g == f]
        models = [context_counts(train, k) for k in range(max_order + 1)]
        if not models[0]:
            continue
        for seq in test:
            for t in range(s0, len(seq)):
                total += 1
                for k in range(max_order + 1):
                    if k and tuple(seq[t - k : t]) not in models[k]:
                        backoffs[k] += 1
                    correct[k] += predict_next(seq[:t], models, k, rank) == seq[t]
    acc = {k: (correct[k] / total if total else float("nan")) for k in correct}
    return CVResult(accuracy=acc, n_targets=total, n_folds=len(np.unique(folds)), start=s0, backoffs=backoffs)


def order_choices(selected: dict[str, int], cv: CVResult | None) -> str:
    """The Markov order each criterion picks, side by side: AIC and BIC (full / observed parameters) and
    cross-validation (the most accurate order); where they disagree, no single order is "enough"."""
    best_cv = max(cv.accuracy, key=lambda k: (cv.accuracy[k], -k)) if cv and cv.accuracy else None
    picks = {
        "AIC": f"{selected.get('aic_full')} / {selected.get('aic_observed')}",
        "BIC": f"{selected.get('bic_full')} / {selected.get('bic_observed')}",
        "CV": "n/a" if best_cv is None else str(best_cv),
    }
    orders = {*selected.values(), *([best_cv] if best_cv is not None else [])}
    agree = "all agree" if len(orders) == 1 else "they disagree"
    return "; ".join(f"{k} {v}" for k, v in picks.items()) + f" ({agree})"
