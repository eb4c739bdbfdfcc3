"""Paired comparison of two history-taking runs on the same interviews.

The two arms interview the same simulated patients (same interview ids, same source transcript, same
reference statement), so the unit of analysis is the interview: for each metric the difference
``B - A`` is taken per interview over the interviews where both arms have a value (no endpoint error, the
metric applicable to both), and summarised as

* the mean difference with a **bootstrap 95 % CI**: interviews resampled with replacement
  (``n_boot`` resamples, seeded), BCa interval of the resampled mean differences, percentile where BCa
  is undefined (``medagent.eval.stats``);
* the **Wilcoxon signed-rank p** (two-sided, scipy, zero differences dropped as in Wilcoxon's original
  treatment, exact distribution for small n without ties, normal approximation otherwise); None when every
  difference is 0 or fewer than 2 pairs remain.

Metrics (``PAIRED_METRICS``): BERTScore F1, ROUGE-L F1, turns, red-flag recall (applicable only where the
reference transcript has a red flag and the arm keeps red-flag state, i.e. amq arms) and differential hit
(1/0, on interviews whose physician diagnosis could be annotated). The per-interview values are kept so
the pairs can be checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.stats import wilcoxon

from medagent.eval.stats import bootstrap_ci
from medagent.history.evaluation.metrics import InterviewRecord

PAIRED_METRICS = (
    ("BERTScore F1", "bertscore_f1"),
    ("ROUGE-L F1", "rouge_l"),
    ("turns", "n_turns"),
    ("red-flag recall", "red_flag_recall"),
    ("differential hit", "differential_hit"),
)


def metric_value(record: InterviewRecord, attr: str) -> float | None:
    """The record's value of ``attr`` as a float (booleans 1/0); None when not applicable or failed."""
    if record.error is not None:
        return None
    v = getattr(record, attr)
    return None if v is None else float(v)


@dataclass(frozen=True)
class PairedDifference:
    """``B - A`` over the interviews both arms scored (module docstring)."""

    metric: str
    arm_a: str
    arm_b: str
    n: int
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None
    ci_low: float | None
    ci_high: float | None
    wilcoxon_p: float | None
    pairs: list[tuple[str, float, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def wilcoxon_p(diffs: Sequence[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank p of ``diffs`` (zeros dropped); None when nothing is left to rank."""
    d = np.asarray([x for x in diffs if x != 0], dtype=float)
    if d.size < 2:
        return None
    return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def paired_difference(
    a: Sequence[InterviewRecord],
    b: Sequence[InterviewRecord],
    attr: str,
    *,
    label: str = "",
    arm_a: str = "A",
    arm_b: str = "B",
    n_boot: int = 10_000,
    seed: int = 0,
) -> PairedDifference:
    """``B - A`` for one metric over the interview ids both runs scored."""
    by_a = {r.interview_id: metric_value(r, attr) for r in a}
    by_b = {r.interview_id: metric_value(r, attr) for r in b}
    pairs = [
        (i, va, vb)
        for i in sorted(by_a.keys() & by_b.keys())
        if (va := by_a[i]) is not None and (vb := by_b[i]) is not None
    ]
    if not pairs:
        return PairedDifference(label or attr, arm_a, arm_b, 0, None, None, None, None, None, None)
    xa = np.array([p[1] for p in pairs])
    xb = np.array([p[2] for p in pairs])
    diffs = (xb - xa).tolist()
    lo, hi = bootstrap_ci(diffs, n_boot, seed)
    return PairedDifference(
        metric=label or attr,
        arm_a=arm_a,
        arm_b=arm_b,
        n=len(pairs),
        mean_a=float(xa.mean()),
        mean_b=float(xb.mean()),
        mean_diff=float(np.mean(diffs)),
        ci_low=lo,
        ci_high=hi,
        wilcoxon_p=wilcoxon_p(diffs),
        pairs=pairs,
    )


def paired_table(
    a: Sequence[InterviewRecord],
    b: Sequence[InterviewRecord],
    *,
    arm_a: str,
    arm_b: str,
    n_boot: int = 10_000,
    seed: int = 0,
) -> list[PairedDifference]:
    """Every metric of ``PAIRED_METRICS`` for one pair of runs."""
    return [
        paired_difference(a, b, attr, label=name, arm_a=arm_a, arm_b=arm_b, n_boot=n_boot, seed=seed)
        for name, attr in PAIRED_METRICS
    ]


def _f(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def paired_markdown(rows: Sequence[PairedDifference]) -> str:
    """One line per (pair of arms, metric): n, both means, the difference, its CI and the Wilcoxon p."""
    lines = [
        "| A | B | metric | n pairs | mean A | mean B | B - A | 95% CI (bootstrap) | Wilcoxon p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ci = "-" if r.ci_low is None else f"[{_f(r.ci_low)}, {_f(r.ci_high)}]"
        lines.append(
            f"| {r.arm_a} | {r.arm_b} | {r.metric} | {r.n} | {_f(r.mean_a)} | {_f(r.mean_b)} | "
            f"{_f(r.mean_diff)} | {ci} | {_f(r.wilcoxon_p, 4)} |"
        )
    return "\n".join(lines)


def pairs_csv_rows(rows: Sequence[PairedDifference]) -> list[dict[str, Any]]:
    """The per-interview values behind every paired difference (to check the pairs by hand)."""
    return [
        {
            "arm_a": r.arm_a,
            "arm_b": r.arm_b,
            "metric": r.metric,
            "interview_id": i,
            "a": va,
            "b": vb,
            "b_minus_a": vb - va,
        }
        for r in rows
        for i, va, vb in r.pairs
    ]
