"""The metrics of one evaluated interview, as ``metrics`` computes them and ``fidelity``, ``paired`` and the
report read them (its own module, so the readers need not import the metrics that fill it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class InterviewRecord:
    """The metrics of one interview (None = not applicable, left out of the aggregate)."""

    interview_id: str
    source: str
    mode: str
    prediction: str
    reference: str
    reference_usable: bool
    valid: bool
    n_turns: int
    asked: int
    blocked: int
    blocked_rate: float
    redundant_rate: float
    finish_reason: str
    red_flags_agent: list[str] = field(default_factory=list)
    red_flags_reference: list[str] | None = None
    red_flag_recall: float | None = None
    differential: list[str] = field(default_factory=list)
    gold_diagnoses: list[str] | None = None
    differential_hit: bool | None = None
    rouge_l: float | None = None
    bertscore_f1: float | None = None
    fidelity: dict[str, float] = field(default_factory=dict)
    n_judged: int = 0
    error: str | None = None
    repeat_rate_lexical: float | None = None
    fidelity_lexical: dict[str, int] | None = None  # medagent.history.evaluation.fidelity's counts
    differential_top3_hit: bool | None = None  # differential_hit over the first 3 diagnoses
    # The case's facts (medagent.history.evaluation.facts_metrics); None: no fact set (fact_endpoints off).
    n_facts: int | None = None
    elicited_fact_recall: float | None = None
    summary_fact_recall: float | None = None
    summary_fact_precision: float | None = None
    patient: str | None = None  # who answered (InterviewEvalConfig.patient); None in rows written before
    # Slot values and red flags the grounding check kept out of the state (medagent.history.agent.grounding);
    # None for an arm that keeps no state (single shot) and in rows written before.
    refused_slots: int | None = None
    refused_flags: int | None = None
    # The share of the agent's questions after the opening that the patient answered (not "I don't know"):
    # elicited facts can only come from these. None with no question after the opening, and in rows
    # written before.
    patient_answered: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InterviewRecord:
        """Reads a row's ``record``: keys written before a field existed take its default, and keys this
        version does not know are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})
