"""Scoring: predictions are joined to gold labels by id here, and nowhere else.

Failures have declared scores (after DSPy's ``failure_score``): an ``INVALID`` answer and a question that
errored both count as wrong, and their rates are reported beside accuracy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from medagent.eval.stats import bootstrap_ci
from medagent.types import INVALID, Gold, Prediction


@dataclass
class BenchmarkMetrics:
    """Multiple-choice metrics for one benchmark (or ``all``)."""

    benchmark: str
    n: int
    correct: int
    accuracy: float
    ci95: tuple[float, float]
    invalid_rate: float
    error_rate: float
    rejected: int = 0
    missing: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci95"] = list(self.ci95)
        return d


def score(
    predictions: Iterable[Prediction],
    golds: Mapping[str, Gold],
    *,
    benchmark: str,
    rejected: int = 0,
    bootstrap_samples: int = 1000,
    seed: int = 0,
) -> BenchmarkMetrics:
    """Scores multiple-choice predictions against golds.

    Args:
        predictions: One per question id (later duplicates are ignored; the run dir prevents them).
        golds: Gold labels by id. Golds with no prediction are counted in ``missing``.
        benchmark: Name reported in the table.
        rejected: Input rows set aside when loading.
    """
    seen: set[str] = set()
    outcomes: list[int] = []
    invalid = errors = 0
    for p in predictions:
        if p.id in seen or p.id not in golds:
            continue
        seen.add(p.id)
        if p.error:
            errors += 1
        elif p.answer == INVALID:
            invalid += 1
        outcomes.append(int(p.error is None and p.answer == golds[p.id].answer))
    n = len(outcomes)
    return BenchmarkMetrics(
        benchmark=benchmark,
        n=n,
        correct=sum(outcomes),
        accuracy=sum(outcomes) / n if n else 0.0,
        ci95=bootstrap_ci(outcomes, bootstrap_samples, seed),
        invalid_rate=invalid / n if n else 0.0,
        error_rate=errors / n if n else 0.0,
        rejected=rejected,
        missing=len(set(golds) - seen),
    )


def question_outcomes(predictions: Iterable[Prediction], golds: Mapping[str, Gold]) -> dict[str, int]:
    """1 (right) or 0 (wrong, ``INVALID`` or errored) per question id that has a gold, as ``score`` counts.

    For comparisons of two runs question by question (flip rates); the first prediction of an id wins.
    """
    out: dict[str, int] = {}
    for p in predictions:
        if p.id in out or p.id not in golds:
            continue
        out[p.id] = int(p.error is None and p.answer == golds[p.id].answer)
    return out


def format_table(rows: list[BenchmarkMetrics]) -> str:
    """A fixed-width table for terminals and logs."""
    header = f"{'benchmark':<16} {'n':>5} {'accuracy':>9} {'95% CI':>17} {'invalid':>8} {'errors':>7} {'rejected':>9}"
    lines = [header, "-" * len(header)]
    for m in rows:
        ci = f"[{m.ci95[0]:.3f}, {m.ci95[1]:.3f}]"
        lines.append(
            f"{m.benchmark:<16} {m.n:>5} {m.accuracy:>9.3f} {ci:>17} {m.invalid_rate:>8.3f} "
            f"{m.error_rate:>7.3f} {m.rejected:>9}"
        )
    return "\n".join(lines)
