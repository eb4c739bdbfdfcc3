"""One interview's row of ``interviews.jsonl``: what the runner and the worker write, what the report reads.

``to_dict`` writes, and ``from_dict`` reads, the JSON keys rows have always had, so run dirs written
before this type existed still resume and report. A row is one of three kinds: scored (``result`` and
``record`` set), ``skipped`` (no usable closing statement) or ``error`` (an endpoint failed; the next run
asks it again). Keys this version does not know are kept in ``extra`` and written back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from medagent.history.agent.amq import TurnRecord
from medagent.llm.usage import UsageRecord

# Written in this order; a key whose value is None is left out (a skipped row has no ``result``).
_KEYS = (
    "interview_id",
    "source",
    "mode",
    "reference",
    "skipped",
    "error",
    "arm",
    "result",
    "record",
    "simulator",
    "simulator_usage",
    "eval_usage",
    "elapsed_s",
)


@dataclass
class InterviewRow:
    """One interview of a run (module docstring).

    Attributes:
        interview_id: The source interview's id (the run dir's key).
        source: The interview's source (``osce``, ``meditod``...).
        reference: ``Reference.to_dict()``: the physician's closing statement.
        mode: The agent's mode (set by the worker on every row).
        arm: The arm of the comparison (``runner.arm_name``).
        skipped: Why the interview was not run.
        error: The endpoint failure that cut the interview short.
        result: ``InterviewResult.to_dict()``.
        record: ``InterviewRecord.to_dict()``: the interview's scores.
        simulator: The simulated patient's answers, each with its fidelity label.
        simulator_usage: The simulator's model calls (``UsageRecord.to_dict()`` plus ``errors``).
        eval_usage: The judge's and the reference red-flag extractor's model calls, likewise.
        elapsed_s: Wall time of the interview.
        extra: Keys this version does not know, kept as read.
    """

    interview_id: str = ""
    source: str = ""
    reference: dict[str, Any] = field(default_factory=dict)
    mode: str | None = None
    arm: str | None = None
    skipped: str | None = None
    error: str | None = None
    result: dict[str, Any] | None = None
    record: dict[str, Any] | None = None
    simulator: list[dict[str, Any]] | None = None
    simulator_usage: dict[str, Any] | None = None
    eval_usage: dict[str, Any] | None = None
    elapsed_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InterviewRow:
        known = {f.name for f in fields(cls)} - {"extra"}
        return cls(
            **{k: v for k, v in d.items() if k in known},
            extra={k: v for k, v in d.items() if k not in known},
        )

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in _KEYS if getattr(self, k) is not None}
        return d | self.extra

    @property
    def scored(self) -> bool:
        """The agent ran to an assessment (neither skipped nor cut short by an endpoint)."""
        return not self.error and not self.skipped and self.result is not None

    @property
    def usages(self) -> tuple[UsageRecord, UsageRecord, UsageRecord]:
        """Model calls of the agent, the simulator and the evaluation (empty where the row has none)."""
        result = self.result or {}
        return tuple(
            UsageRecord.from_dict(u) for u in (result.get("usage"), self.simulator_usage, self.eval_usage)
        )  # type: ignore[return-value]

    @property
    def turns(self) -> list[TurnRecord]:
        """The agent's turn log (none for a single_shot interview or a row that was not scored)."""
        known = {f.name for f in fields(TurnRecord)}
        turns = (self.result or {}).get("turns", [])
        return [TurnRecord(**{k: v for k, v in t.items() if k in known}) for t in turns or []]

    @property
    def finish_reason(self) -> str:
        return str((self.result or {}).get("finish_reason", ""))

    @property
    def asked(self) -> list[str]:
        """The questions the agent asked, in order (none for a row that was not scored)."""
        state = (self.result or {}).get("final_state") or {}
        return [q["text"] for q in state.get("asked") or []]

    def outcome(self) -> str:
        """One line for the worker's log: the error, why it was skipped, or its turns and finish reason."""
        result = self.result or {}
        return self.error or self.skipped or f"{result.get('n_turns')} turns ({result.get('finish_reason')})"
