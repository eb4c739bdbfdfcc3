"""Data contracts shared by every layer.

``Question`` and ``Gold`` are separate types on purpose: agents receive ``Question`` only, and scoring
joins predictions to ``Gold`` by id in one place (``medagent.eval.scoring``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

INVALID = "INVALID"


@dataclass(frozen=True)
class Question:
    """What an agent is allowed to see.

    Attributes:
        id: Stable id, unique within a benchmark.
        text: The vignette and question stem.
        options: Letter -> option text, or ``None`` for open-ended questions.
        benchmark: Registered benchmark name.
        metadata: Non-label facts (source release, specialty, ...). Never holds the answer.
    """

    id: str
    text: str
    options: dict[str, str] | None
    benchmark: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Question:
        return cls(
            id=str(d["id"]),
            text=d["text"],
            options=dict(d["options"]) if d.get("options") else None,
            benchmark=d["benchmark"],
            metadata=dict(d.get("metadata") or {}),
        )


@dataclass(frozen=True)
class Gold:
    """The label side of a benchmark item; never shipped to workers.

    Attributes:
        id: Same id as the matching ``Question``.
        answer: Correct option letter (or label, e.g. ``"A"`` for yes in yes/no sets).
        answer_text: Text of the correct option.
        explanation: Reference explanation for open-ended evaluation, when the data set has one.
    """

    id: str
    answer: str
    answer_text: str = ""
    explanation: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Gold:
        return cls(
            id=str(d["id"]),
            answer=d["answer"],
            answer_text=d.get("answer_text", ""),
            explanation=d.get("explanation"),
        )


@dataclass(frozen=True)
class Rejected:
    """A malformed input row, set aside with the reason it was refused."""

    benchmark: str
    row: int
    reason: str
    id: str | None = None
    raw: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Prediction:
    """One agent answer.

    Attributes:
        id: Question id.
        benchmark: Benchmark name.
        answer: Option letter, free text (open-ended), or ``INVALID`` when nothing parseable came back.
        raw: The model's raw final reply, kept so an INVALID can be audited.
        error: Set when the agent failed on this question (an exception's type and message); ``answer``
            is then ``INVALID``.
        trace: Steps (tool, arguments, latency, tokens, ...), one dict per step.
        evidence: Grounding records (doc id, source, quoted span).
        usage: What the question cost: ``medagent.llm.usage.UsageRecord.to_dict()`` (read it back with
            ``UsageRecord.from_dict``), the same keys for every agent.
        latency_s: Wall time of the question.
    """

    id: str
    benchmark: str
    answer: str
    raw: str = ""
    error: str | None = None
    trace: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Prediction:
        return cls(
            id=str(d["id"]),
            benchmark=d["benchmark"],
            answer=d["answer"],
            raw=d.get("raw", ""),
            error=d.get("error"),
            trace=list(d.get("trace") or []),
            evidence=list(d.get("evidence") or []),
            usage=dict(d.get("usage") or {}),
            latency_s=float(d.get("latency_s") or 0.0),
        )
