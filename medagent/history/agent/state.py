"""The explicit interview state s_t = (G_t, H_t, Q_t, r_t, phi_t) and its pure transitions.

Every change of state is a function ``(state, event) -> state`` (``transition``); states are frozen, so the
agent keeps every one of them and a run can be inspected turn by turn. The events (questions asked or
blocked, answers, the parsed pre-processing updates, phase moves) are plain data with ``to_dict``; folding
them over the initial state with ``replay`` gives back every state without calling a model.

Slots are the facts a history collects; each belongs to one of the 11 MediTOD inquiry categories of
``conf/interview/priorities.yaml`` (the completeness weights and priority orders are per category).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any


class Phase(str, Enum):
    TRIAGE = "triage"
    HYPOTHESIS_FORMATION = "hypothesis_formation"
    DEEP_DIVE = "deep_dive"
    CONFIRMATION = "confirmation"


@dataclass(frozen=True)
class SlotSpec:
    """A fact the history collects: its MediTOD category, what it means, and a plain fallback question."""

    name: str
    category: str
    description: str
    question: str


# Order inside a category is the order slots are asked in. ``allergies`` is past history and ``occupation``
# an exposure, as in MediTOD (``medagent.interview.meditod.CATEGORY_ALIASES``).
SLOTS: tuple[SlotSpec, ...] = (
    SlotSpec("symptom", "symptom", "the main complaint and other current symptoms", "What symptoms are you having?"),
    SlotSpec("onset", "symptom", "when and how it started", "When did it start?"),
    SlotSpec("duration", "symptom", "how long it has lasted; constant or intermittent", "How long has it been going on?"),
    SlotSpec("severity", "symptom", "how bad it is (e.g. 0-10), effect on daily life", "How severe is it, on a scale from 0 to 10?"),
    SlotSpec("character", "symptom", "what it is like (e.g. dry or productive cough, sharp or dull pain)", "Can you describe what it feels like?"),
    SlotSpec("location", "symptom", "where it is and whether it spreads", "Where exactly do you feel it?"),
    SlotSpec("progression", "symptom", "getting better, worse or unchanged", "Has it been getting better or worse?"),
    SlotSpec("aggravating_factors", "symptom", "what makes it worse", "Does anything make it worse?"),
    SlotSpec("relieving_factors", "symptom", "what makes it better", "Does anything make it better?"),
    SlotSpec("medical_history", "medical_history", "past illnesses, hospital stays, surgery, vaccines", "Do you have any medical conditions, or have you been in hospital before?"),
    SlotSpec("allergies", "medical_history", "allergies and reactions", "Do you have any allergies?"),
    SlotSpec("medication", "medication", "current medicines, inhalers, supplements", "Are you taking any medications?"),
    SlotSpec("medical_tests", "medical_test", "tests already done and their results", "Have you had any tests done for this?"),
    SlotSpec("patient_concerns", "disease", "what the patient thinks or fears it is", "Do you have any concerns about what this might be?"),
    SlotSpec("family_history", "family_history", "illnesses in the family", "Does anything run in your family?"),
    SlotSpec("habits", "habit", "smoking, alcohol, recreational drugs", "Do you smoke, drink alcohol or use any drugs?"),
    SlotSpec("exposure", "exposure", "sick contacts, animals, dust, fumes", "Have you been around anyone sick, or exposed to anything unusual?"),
    SlotSpec("occupation", "exposure", "work and exposures at work", "What do you do for work?"),
    SlotSpec("residence", "residence", "where and with whom the patient lives", "Who do you live with, and where?"),
    SlotSpec("travel", "travel", "recent travel", "Have you travelled anywhere recently?"),
    SlotSpec("basic_information", "basic_information", "age, sex, and who is giving the history", "How old are you?"),
)  # fmt: skip
SLOT_BY_NAME: dict[str, SlotSpec] = {s.name: s for s in SLOTS}
# A question's target when it asks about no single slot (Confirmation questions about the hypotheses).
NO_SLOT = "other"


def slots_of(category: str) -> list[str]:
    return [s.name for s in SLOTS if s.category == category]


@dataclass(frozen=True)
class SlotValue:
    """A gathered fact: ``value`` as the patient gave it (a denial such as "none" fills the slot too) and
    ``quote``, the patient's words it rests on (``medagent.history.agent.grounding``)."""

    slot: str
    value: str
    turn: int
    quote: str = ""


@dataclass(frozen=True)
class Refusal:
    """A slot value (``kind="slot"``) or red flag (``kind="red_flag"``) kept out of the state, and why."""

    kind: str
    name: str
    value: str
    quote: str
    reason: str
    turn: int = 0


@dataclass(frozen=True)
class Hypothesis:
    """One differential diagnosis with its probability (the differential's probabilities sum to 1)."""

    diagnosis: str
    probability: float
    reason: str = ""


@dataclass(frozen=True)
class AskedQuestion:
    """A question put to the patient (Q_t); ``answer`` is None until the patient replies.

    ``reason`` says why the policy chose the slot (its order, or its expected value and best finding).
    """

    turn: int
    text: str
    slot: str
    phase: str
    answer: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class BlockedQuestion:
    """A proposed question that redundancy control refused (never asked); ``reason`` is the check."""

    turn: int
    text: str
    slot: str
    reason: str
    similar_to: str = ""


@dataclass(frozen=True)
class InterviewState:
    """s_t = (G_t, H_t, Q_t, r_t, phi_t), plus the running summary and bookkeeping.

    Attributes:
        slots: G_t, gathered facts by slot name.
        differential: H_t, ranked (most probable first).
        asked: Q_t, questions in the order asked (with answers).
        red_flags: r_t, red-flag ids (``HistoryAgentConfig.red_flags``) in order of detection.
        phase: phi_t.
        summary: The latest summary of the history (from pre-processing).
        route: The pre-processing router's latest decision: ``question`` or ``retrieve``.
        blocked: Proposed questions refused by redundancy control.
        refused: Slot values and red flags the grounding check kept out (for want of a patient quote).
        confirmation_asked: Questions asked since entering Confirmation.
        errors: Malformed model output and other handled problems, for audit.
    """

    slots: dict[str, SlotValue] = field(default_factory=dict)
    differential: tuple[Hypothesis, ...] = ()
    asked: tuple[AskedQuestion, ...] = ()
    red_flags: tuple[str, ...] = ()
    phase: Phase = Phase.TRIAGE
    summary: str = ""
    route: str = "question"
    blocked: tuple[BlockedQuestion, ...] = ()
    confirmation_asked: int = 0
    errors: tuple[str, ...] = ()
    refused: tuple[Refusal, ...] = ()

    @property
    def turn(self) -> int:
        """Questions asked so far (the next question's turn number)."""
        return len(self.asked)

    @property
    def pending(self) -> AskedQuestion | None:
        """The last question if it has no answer yet."""
        return self.asked[-1] if self.asked and self.asked[-1].answer is None else None

    def asks_of(self, slot: str) -> int:
        return sum(q.slot == slot for q in self.asked)

    def transcript(self) -> str:
        """The interview so far as ``Doctor:`` / ``Patient:`` lines."""
        lines: list[str] = []
        for q in self.asked:
            lines.append(f"Doctor: {q.text}")
            if q.answer is not None:
                lines.append(f"Patient: {q.answer}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["phase"] = self.phase.value
        d["slots"] = {k: asdict(v) for k, v in self.slots.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InterviewState:
        return cls(
            slots={k: SlotValue(**v) for k, v in (d.get("slots") or {}).items()},
            differential=tuple(Hypothesis(**h) for h in d.get("differential") or ()),
            asked=tuple(AskedQuestion(**q) for q in d.get("asked") or ()),
            red_flags=tuple(d.get("red_flags") or ()),
            phase=Phase(d.get("phase", Phase.TRIAGE.value)),
            summary=str(d.get("summary", "")),
            route=str(d.get("route", "question")),
            blocked=tuple(BlockedQuestion(**b) for b in d.get("blocked") or ()),
            confirmation_asked=int(d.get("confirmation_asked", 0)),
            errors=tuple(d.get("errors") or ()),
            refused=tuple(Refusal(**r) for r in d.get("refused") or ()),
        )


# ----------------------------------------------------------------------------------------------- events
@dataclass(frozen=True)
class Asked:
    question: AskedQuestion
    kind: str = "asked"


@dataclass(frozen=True)
class Blocked:
    blocked: BlockedQuestion
    kind: str = "blocked"


@dataclass(frozen=True)
class Answered:
    answer: str
    kind: str = "answered"


@dataclass(frozen=True)
class Updated:
    """The validated pre-processing output of one turn (fields that failed validation are None).

    ``facts`` are grounded ``(slot, value, quote)`` changes; ``refused`` what the grounding check kept out.
    """

    summary: str | None = None
    facts: tuple[tuple[str, str, str], ...] = ()
    differential: tuple[Hypothesis, ...] | None = None
    red_flags: tuple[str, ...] = ()
    route: str | None = None
    errors: tuple[str, ...] = ()
    refused: tuple[Refusal, ...] = ()
    kind: str = "updated"


@dataclass(frozen=True)
class PhaseChanged:
    phase: Phase
    reason: str = ""
    kind: str = "phase"


Event = Asked | Blocked | Answered | Updated | PhaseChanged


def event_to_dict(event: Event) -> dict[str, Any]:
    d = asdict(event)
    if isinstance(event, PhaseChanged):
        d["phase"] = event.phase.value
    return d


def event_from_dict(d: dict[str, Any]) -> Event:
    kind = d.get("kind")
    if kind == "asked":
        return Asked(AskedQuestion(**d["question"]))
    if kind == "blocked":
        return Blocked(BlockedQuestion(**d["blocked"]))
    if kind == "answered":
        return Answered(str(d["answer"]))
    if kind == "updated":
        diff = d.get("differential")
        return Updated(
            summary=d.get("summary"),
            facts=tuple(_fact(f) for f in d.get("facts") or ()),
            differential=None if diff is None else tuple(Hypothesis(**h) for h in diff),
            red_flags=tuple(d.get("red_flags") or ()),
            route=d.get("route"),
            errors=tuple(d.get("errors") or ()),
            refused=tuple(Refusal(**r) for r in d.get("refused") or ()),
        )
    if kind == "phase":
        return PhaseChanged(Phase(d["phase"]), str(d.get("reason", "")))
    raise ValueError(f"unknown event kind {kind!r}")


def _fact(f: Sequence[Any]) -> tuple[str, str, str]:
    """A recorded fact; events written before facts carried quotes have ``(slot, value)``."""
    slot, value, *quote = f
    return str(slot), str(value), str(quote[0]) if quote else ""


def transition(state: InterviewState, event: Event) -> InterviewState:
    """The state after ``event``; pure (the input state is never changed)."""
    if isinstance(event, Asked):
        if state.pending is not None:
            raise ValueError("a question is already pending; record its answer first")
        extra = 1 if state.phase is Phase.CONFIRMATION else 0
        return replace(
            state, asked=(*state.asked, event.question), confirmation_asked=state.confirmation_asked + extra
        )
    if isinstance(event, Blocked):
        return replace(state, blocked=(*state.blocked, event.blocked))
    if isinstance(event, Answered):
        pending = state.pending
        if pending is None:
            raise ValueError("no pending question to answer")
        return replace(state, asked=(*state.asked[:-1], replace(pending, answer=event.answer)))
    if isinstance(event, Updated):
        slots = dict(state.slots)
        turn = max(state.turn - 1, 0)
        for slot, value, quote in event.facts:
            slots[slot] = SlotValue(slot, value, turn, quote)
        flags = tuple(dict.fromkeys((*state.red_flags, *event.red_flags)))
        return replace(
            state,
            slots=slots,
            summary=event.summary if event.summary is not None else state.summary,
            differential=event.differential if event.differential is not None else state.differential,
            red_flags=flags,
            route=event.route or state.route,
            errors=(*state.errors, *event.errors),
            refused=(*state.refused, *(replace(r, turn=turn) for r in event.refused)),
        )
    if isinstance(event, PhaseChanged):
        entering = event.phase is Phase.CONFIRMATION and state.phase is not Phase.CONFIRMATION
        return replace(
            state, phase=event.phase, confirmation_asked=0 if entering else state.confirmation_asked
        )
    raise TypeError(f"not an interview event: {event!r}")


def replay(events: Iterable[Event], initial: InterviewState | None = None) -> list[InterviewState]:
    """Every state of a run: the initial one, then one after each event."""
    states = [initial or InterviewState()]
    for e in events:
        states.append(transition(states[-1], e))
    return states


# ------------------------------------------------------------------------------------------ validation
def normalise_differential(items: Sequence[tuple[str, float, str]], max_n: int) -> tuple[Hypothesis, ...]:
    """Ranks hypotheses, merges duplicates (case-insensitive), keeps ``max_n`` and rescales to sum 1.

    Negative or non-finite probabilities count as 0; if all are 0 the kept hypotheses share equally.
    """
    merged: dict[str, list[Any]] = {}
    for name, p, reason in items:
        key = " ".join(name.lower().split())
        if not key:
            continue
        prob = float(p) if p == p and 0 <= float(p) < float("inf") else 0.0
        if key in merged:
            merged[key][1] += prob
        else:
            merged[key] = [name.strip(), prob, reason.strip()]
    ranked = sorted(merged.values(), key=lambda x: -x[1])[:max_n]
    total = sum(x[1] for x in ranked)
    if not ranked:
        return ()
    if total <= 0:
        return tuple(Hypothesis(n, 1 / len(ranked), r) for n, _, r in ranked)
    return tuple(Hypothesis(n, p / total, r) for n, p, r in ranked)


_UNKNOWN = re.compile(
    r"^\s*(?:unknown|not (?:mentioned|stated|asked|given)|n/?a|none given|null|-)?\s*$", re.I
)


def is_informative(value: str) -> bool:
    """False for empty or placeholder values ("unknown", "not mentioned"): such a slot stays missing."""
    return not _UNKNOWN.match(value)
