"""Data contracts for interviews and their annotations (shared by annotators and the network analysis)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# The 11 MediTOD inquiry categories of physician questions, in the ontology's order.
INQUIRY_CATEGORIES: tuple[str, ...] = (
    "symptom",
    "medical_history",
    "habit",
    "medication",
    "family_history",
    "exposure",
    "medical_test",
    "disease",
    "residence",
    "travel",
    "basic_information",
)


@dataclass(frozen=True)
class Turn:
    """One utterance: ``speaker`` is ``doctor`` or ``patient``; ``index`` is its 0-based position."""

    index: int
    speaker: str
    text: str


@dataclass(frozen=True)
class QuestionAnnotation:
    """A physician question and its inquiry category (one of ``INQUIRY_CATEGORIES``)."""

    turn: int
    text: str
    category: str


@dataclass
class Annotation:
    """MediTOD-style annotation of one interview (gold, or produced by an annotator).

    Attributes:
        interview_id: E.g. ``RES0001`` (Fareez) or ``115`` (MediTOD).
        source: ``fareez`` or ``meditod``.
        annotator: ``gold``, ``lexicon`` or ``llm``.
        positive_findings: Canonical symptom names the patient has (MediTOD ontology names).
        negative_findings: Canonical symptom names the patient denies (pertinent negatives).
        diagnoses: Differential diagnoses the physician states.
        questions: Every physician question in order, with its category.
        errors: Problems met while annotating (e.g. a model's malformed output), kept for audit.
    """

    interview_id: str
    source: str
    annotator: str
    positive_findings: list[str] = field(default_factory=list)
    negative_findings: list[str] = field(default_factory=list)
    diagnoses: list[str] = field(default_factory=list)
    questions: list[QuestionAnnotation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Annotation:
        return cls(
            interview_id=str(d["interview_id"]),
            source=d.get("source", ""),
            annotator=d.get("annotator", ""),
            positive_findings=list(d.get("positive_findings") or []),
            negative_findings=list(d.get("negative_findings") or []),
            diagnoses=list(d.get("diagnoses") or []),
            questions=[QuestionAnnotation(**q) for q in d.get("questions") or []],
            errors=list(d.get("errors") or []),
        )

    def category_sequence(self) -> list[str]:
        return [q.category for q in self.questions]
