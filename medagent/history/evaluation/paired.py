"""Paired comparison of two history-taking runs on the same interviews.

The two arms interview the same simulated patients (same interview ids, same source transcript, same
reference statement), so the unit of analysis is the interview: for each metric the difference
``B - A`` is taken per interview over the interviews where both arms have a value (no endpoint error, the
metric applicable to both), and summarised as

* the mean difference with a **bootstrap 95 % CI**: interviews resampled with replacement
  (``n_boot`` resamples, seeded), BCa interval of the resampled mean differences, percentile where BCa
  is undefined (``medagent.eval.stats``);
* the **t-based 95 % CI** of the mean difference (Student t with n - 1 degrees of freedom), which does
  not under-cover at n = 8-16 the way a percentile bootstrap does;
* the **sign-flip permutation p** (two-sided): under H0 each interview's difference is as likely to have
  either sign; exact over all 2^n sign vectors up to n = 16, else ``n_perm`` random flips (seeded), with
  the observed vector counted (p >= 1 / (n_perm + 1));
* the **Wilcoxon signed-rank p** (two-sided, scipy, zero differences dropped as in Wilcoxon's original
  treatment, exact distribution for small n without ties, normal approximation otherwise); None when every
  difference is 0 or fewer than 2 pairs remain.

``arms_comparison`` compares every arm of a multi-arm run with a reference arm on the configured endpoints
and adjusts the permutation p-values with **Holm**'s step-down method over every comparison it reports.

Metrics (``PAIRED_METRICS``): BERTScore F1, ROUGE-L F1, turns, red-flag recall (applicable only where the
reference transcript has a red flag and the arm keeps red-flag state, i.e. amq arms) and differential hit
(1/0, on interviews whose physician diagnosis could be annotated). The per-interview values are kept so
the pairs can be checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
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
    t_low: float | None = None
    t_high: float | None = None
    perm_p: float | None = None
    holm_p: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def wilcoxon_p(diffs: Sequence[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank p of ``diffs`` (zeros dropped); None when nothing is left to rank."""
    d = np.asarray([x for x in diffs if x != 0], dtype=float)
    if d.size < 2:
        return None
    return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


EXACT_MAX_N = 16


def sign_flip_p(diffs: Sequence[float], n_perm: int = 20_000, seed: int = 0) -> float | None:
    """Two-sided sign-flip permutation p of the mean difference (module docstring); None for no pairs."""
    d = np.asarray(diffs, dtype=float)
    n = d.size
    if n == 0:
        return None
    obs = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if n <= EXACT_MAX_N:
        signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        means = np.abs(signs @ d) / n
        return float(np.mean(means >= obs - tol))
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n_perm, n))
    means = np.abs(signs @ d) / n
    return float((1 + np.sum(means >= obs - tol)) / (n_perm + 1))


def t_interval(diffs: Sequence[float], level: float = 0.95) -> tuple[float | None, float | None]:
    """Student-t CI of the mean difference; None for fewer than 2 pairs (a zero spread gives the mean)."""
    from scipy.stats import t

    d = np.asarray(diffs, dtype=float)
    if d.size < 2:
        return None, None
    half = float(t.ppf(0.5 + level / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size))
    return float(d.mean() - half), float(d.mean() + half)


def holm(ps: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None and is not counted)."""
    idx = sorted((i for i, p in enumerate(ps) if p is not None), key=lambda i: ps[i])  # type: ignore[arg-type, return-value]
    m = len(idx)
    out: list[float | None] = [None] * len(ps)
    running = 0.0
    for k, i in enumerate(idx):
        running = max(running, min(1.0, (m - k) * float(ps[i])))  # type: ignore[arg-type]
        out[i] = running
    return out


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
    t_lo, t_hi = t_interval(diffs)
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
        t_low=t_lo,
        t_high=t_hi,
        perm_p=sign_flip_p(diffs, seed=seed),
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


def arms_comparison(
    records: Mapping[str, Sequence[InterviewRecord]],
    endpoints: Sequence[str],
    reference: str,
    *,
    n_boot: int = 10_000,
    seed: int = 0,
) -> list[PairedDifference]:
    """Every other arm minus ``reference`` on each endpoint (a record attribute), over the interviews both
    scored; Holm over all of them (module docstring). An endpoint no record has is an error."""
    if reference not in records:
        raise ValueError(f"reference arm {reference!r} is not among the arms {sorted(records)}")
    known = {f for rs in records.values() for r in rs for f in vars(r)}
    missing = [e for e in endpoints if known and e not in known]
    if missing:
        raise ValueError(f"endpoints {missing} are not fields of the interview records")
    rows = [
        paired_difference(records[reference], recs, e, arm_a=reference, arm_b=arm, n_boot=n_boot, seed=seed)
        for arm, recs in records.items()
        if arm != reference
        for e in endpoints
    ]
    adjusted = holm([r.perm_p for r in rows])
    return [replace(r, holm_p=p) for r, p in zip(rows, adjusted, strict=True)]


def arms_markdown(rows: Sequence[PairedDifference]) -> str:
    """The multi-arm table: n, means, difference, t and BCa CIs, permutation p and its Holm adjustment."""
    lines = [
        "| reference | arm | endpoint | n pairs | mean ref | mean arm | arm - ref | 95% CI (t) | "
        "95% CI (BCa) | sign-flip p | Holm p |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t_ci = "-" if r.t_low is None else f"[{_f(r.t_low)}, {_f(r.t_high)}]"
        b_ci = "-" if r.ci_low is None else f"[{_f(r.ci_low)}, {_f(r.ci_high)}]"
        lines.append(
            f"| {r.arm_a} | {r.arm_b} | {r.metric} | {r.n} | {_f(r.mean_a)} | {_f(r.mean_b)} | "
            f"{_f(r.mean_diff)} | {t_ci} | {b_ci} | {_f(r.perm_p, 4)} | {_f(r.holm_p, 4)} |"
        )
    return "\n".join(lines)


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


def spread_markdown(rows: Sequence[PairedDifference]) -> list[str]:
    """The run-to-run spread: one arm run twice on the same interviews (``repeat_arm``), per endpoint: the mean
    difference with its t CI, the sd of the per-interview differences and how many interviews came out the same.
    A comparison whose difference is within this spread cannot be told from rerunning one arm."""
    lines = [
        "## Run-to-run spread (one arm run twice)",
        "",
        "| arm | endpoint | n pairs | mean | mean (repeat) | repeat - first | 95% CI (t) | sd of differences | identical |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        diffs = [b - a for _, a, b in r.pairs]
        sd = float(np.std(diffs, ddof=1)) if len(diffs) > 1 else None
        same = sum(d == 0 for d in diffs)
        t_ci = "-" if r.t_low is None else f"[{_f(r.t_low)}, {_f(r.t_high)}]"
        lines.append(
            f"| {r.arm_a} | {r.metric} | {r.n} | {_f(r.mean_a)} | {_f(r.mean_b)} | {_f(r.mean_diff)} | {t_ci} | "
            f"{_f(sd)} | {same} of {len(diffs)} |"
        )
    return [*lines, ""]
