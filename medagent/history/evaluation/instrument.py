"""The instrument check that opens every interview report: can the primary endpoint see the effect?

An endpoint that scores the oracle (``single_shot:full``: the physician's whole interview) the same as the
opening-only baseline (``single_shot:opening``: the presenting complaint) cannot rank any two questioning
strategies, which lie between those two. So the report first pairs the two arms on the interviews both
scored and asks whether the primary endpoint (``facts_metrics.PRIMARY``) separates them: the paired
difference oracle − opening with its 95 % CI (``paired.paired_difference``) must exclude 0 and favour the
oracle. When either arm is missing, has no value of the endpoint, or the CI holds 0, the check fails and
the report says so at its top: no comparison in it can then be read as a difference between strategies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from medagent.history.evaluation.facts_metrics import PRIMARY
from medagent.history.evaluation.paired import PairedDifference, paired_difference
from medagent.history.evaluation.record import InterviewRecord

ORACLE = "single_shot:full"
OPENING = "single_shot:opening"
# Shown beside the primary endpoint, so the reader sees what the older measures did on the same pairs.
ALSO = (
    ("elicited fact recall", "elicited_fact_recall"),
    ("BERTScore F1", "bertscore_f1"),
    ("ROUGE-L F1", "rouge_l"),
)


def run_arm(rows: Mapping[str, Mapping[str, Any]], label: str) -> str:
    """The arm of a run, read from its rows (``runner.arm_name``), else its label."""
    arms = {r.get("arm") for r in rows.values() if r.get("arm")}
    return str(arms.pop()) if len(arms) == 1 else label


@dataclass(frozen=True)
class InstrumentCheck:
    """The check's outcome: ``passed`` and why, with the paired differences behind it."""

    passed: bool
    reason: str
    rows: tuple[PairedDifference, ...] = ()

    def markdown(self) -> str:
        from medagent.history.evaluation.paired import paired_markdown

        verdict = "PASSED" if self.passed else "FAILED"
        head = [f"## Instrument check: {verdict}", "", self.reason, ""]
        if not self.passed:
            head.insert(0, "> **The instrument check failed: no comparison below can be read as a difference "
                           "between questioning strategies.**\n")  # fmt: skip
        return "\n".join(head + ([paired_markdown(self.rows), ""] if self.rows else []))


def instrument_check(
    runs: Sequence[tuple[str, Sequence[InterviewRecord]]], *, n_boot: int = 10_000, seed: int = 0
) -> InstrumentCheck:
    """Oracle vs opening-only on the primary endpoint (module docstring); ``runs``: (arm, records)."""
    by_arm = dict(runs)
    missing = [a for a in (ORACLE, OPENING) if a not in by_arm]
    if missing:
        return InstrumentCheck(
            False,
            f"Not run: the report has no {' and no '.join(missing)} arm (run both on these interviews and "
            "pass them in `compare`).",
        )
    a, b = by_arm[OPENING], by_arm[ORACLE]
    rows = tuple(
        paired_difference(a, b, attr, label=name, arm_a=OPENING, arm_b=ORACLE, n_boot=n_boot, seed=seed)
        for name, attr in (PRIMARY, *ALSO)
    )
    primary = rows[0]
    if primary.n == 0 or primary.ci_low is None or primary.ci_high is None:
        return InstrumentCheck(
            False, f"No interview has {PRIMARY[0]} in both arms (fact endpoints off?).", rows
        )
    separates = primary.ci_low > 0
    reason = (
        f"{PRIMARY[0]}, oracle − opening over {primary.n} interviews: {primary.mean_diff:+.3f} "
        f"[{primary.ci_low:+.3f}, {primary.ci_high:+.3f}] (95% CI). "
        + (
            "The CI excludes 0: the endpoint tells the whole interview from the presenting complaint."
            if separates
            else "The CI does not exclude 0 in the oracle's favour: the endpoint cannot tell the whole "
            "interview from the presenting complaint."
        )
    )
    return InstrumentCheck(separates, reason, rows)
