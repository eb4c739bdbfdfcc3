"""Next question: the most valuable missing slot, phrased by the model, checked for redundancy.

**Which slot.** ``phases.ranked_slots``: every missing slot (no value yet, asked fewer than
``max_asks_per_slot`` times) in any phase, ordered by pass (``slots_per_pass``), then either by the
configured category order (``policy=order``: ``paper`` or ``physician``) or by the expected value of asking
it in the current state (``policy=information``: ``medagent.history.agent.value``). The phase does not restrict
the candidates; the completeness weights and entropy decide *when* phases move. In Confirmation the target
is ``other`` first: a question that confirms or rules out the leading hypotheses or a red flag.

**Phrasing.** The model writes the question for that slot given the state (``history_question``) and says
which slot it actually asks about. A malformed reply falls back to the slot's plain question (recorded).

**Redundancy.** Each proposal goes through ``RedundancyChecker``; a blocked question is recorded
(``Blocked`` event) and replaced: first the model rephrases it once for the same slot (told why it was
blocked), then the next eligible slot is tried (a slot whose question was blocked twice is skipped for this
turn), for at most ``1 + max_replacements`` proposals per turn. A replacement that repeats a question
already refused this turn, or drifts back to a skipped slot, is swapped for the target slot's plain
question, because a small model (the 1.5B CPU model) can return the same refused question again and again
and so end an interview after a few turns. If none passes, no question is asked and the interview
finishes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import field_validator

from medagent.history.agent.information import CATEGORY_PREFIX
from medagent.history.agent.phases import Rules, eligible_slots, ranked_slots, slot_pass, slot_values
from medagent.history.agent.preprocess import render_differential, slot_table
from medagent.history.agent.redundancy import RedundancyChecker, normalise_text
from medagent.history.agent.state import (
    NO_SLOT,
    SLOT_BY_NAME,
    SLOTS,
    AskedQuestion,
    Blocked,
    BlockedQuestion,
    Event,
    InterviewState,
    Phase,
    transition,
)
from medagent.llm.base import ChatModel
from medagent.llm.structured import Output, ask, capped_str, enum_str, one_line
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt

_ABOUT_THE_PATIENT = re.compile(r"\bthe patient(?:'s|s)?\b", re.IGNORECASE)


def spoken_question(value: str) -> str:
    """A question reply's text, validated: one line, said to the patient. A small model sometimes writes a
    note to itself ("What is the patient's age?"): said to the patient, it is not a question to them, and
    the patient cannot answer it."""
    text = one_line(value, "question")
    if _ABOUT_THE_PATIENT.search(text):
        raise ValueError("'question' must be said to the patient, as 'you', not ask about 'the patient'")
    return text


class QuestionReply(Output):
    """The ``history_question`` reply: the question, and the slot it actually asks about."""

    question: capped_str(240)  # type: ignore[valid-type]
    slot: enum_str([*(s.name for s in SLOTS), NO_SLOT])  # type: ignore[valid-type]

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        return spoken_question(value)

    @field_validator("slot")
    @classmethod
    def _slot(cls, value: str) -> str:
        if value not in SLOT_BY_NAME and value != NO_SLOT:
            raise ValueError(f"'slot' must be a slot name or {NO_SLOT!r}, got {value[:40]!r}")
        return value


def fallback_question(slot: str, state: InterviewState) -> str:
    if slot in SLOT_BY_NAME:
        return SLOT_BY_NAME[slot].question
    top = state.differential[0].diagnosis if state.differential else "this"
    return f"Is there anything else you have noticed that could be related to {top}?"


def candidate_slots(state: InterviewState, rules: Rules, skip: set[str]) -> list[str]:
    """Targets in order of value for this turn (module docstring)."""
    order = ranked_slots(state, rules)
    if state.phase is Phase.CONFIRMATION:
        order = [NO_SLOT, *order]
    return [s for s in order if s not in skip]


def choice_reason(state: InterviewState, rules: Rules, slot: str) -> str:
    """Why ``slot`` was the target, for the trace and the patient page."""
    if slot not in SLOT_BY_NAME:
        return "confirmation: the leading hypotheses and red flags"
    if rules.cfg.questioning.policy == "information":
        # V is normalised over the turn's candidates, so it is computed over all of them, as ranked_slots does.
        names = eligible_slots(state, rules)
        v = slot_values(state, rules, names if slot in names else [*names, slot])[slot]
        via = f" via {v.best}" if v.best else ""
        return f"V={v.value:.3f} (normalised) from completeness {v.gain:.3f} + information {v.information:.3f}{via}"
    return f"{rules.cfg.questioning.priorities} order, pass {slot_pass(slot, rules.cfg.questioning.slots_per_pass) + 1}"


@dataclass
class Proposal:
    """The outcome of one turn's question selection: events to apply, and the question (None = none left)."""

    events: list[Event]
    question: AskedQuestion | None


class QuestionPolicy:
    """Chooses, phrases and checks the next question (module docstring)."""

    def __init__(self, llm: ChatModel, rules: Rules, checker: RedundancyChecker) -> None:
        self.llm = llm
        self.rules = rules
        self.cfg = rules.cfg
        self.checker = checker

    def finding(self, state: InterviewState, slot: str) -> str:
        """The finding the information policy scored for ``slot`` ('' for the order policies, confirmation
        and category indicators): the question must ask about it, not about the slot in general."""
        if self.cfg.questioning.policy != "information" or slot not in SLOT_BY_NAME:
            return ""
        best = slot_values(state, self.rules, [slot])[slot].best
        return "" if best.startswith(CATEGORY_PREFIX) else best

    async def _phrase(
        self, state: InterviewState, slot: str, blocked: BlockedQuestion | None, log: UsageRecord
    ) -> tuple[str, str]:
        spec = SLOT_BY_NAME.get(slot)
        messages = load_prompt("history_question").render(
            phase=state.phase.value,
            summary=state.summary,
            slots=slot_table(state),
            differential=render_differential(state),
            red_flags=[f"{f}: {self.cfg.red_flags.get(f, f)}" for f in state.red_flags],
            asked=[q.text for q in state.asked],
            target=slot,
            target_description=spec.description if spec else "confirm or rule out the leading hypotheses",
            finding=self.finding(state, slot),
            blocked=blocked.text if blocked else "",
            blocked_reason=blocked.reason if blocked else "",
        )
        reply = await ask(
            self.llm,
            messages,
            QuestionReply,
            prompt="history_question",
            json_schema_ok=self.cfg.generation.json_schema,
            tag=f"turn {state.turn} question ({slot})",
            usage=log,
            max_tokens=self.cfg.generation.max_tokens_question,
            temperature=self.cfg.generation.temperature,
            top_p=self.cfg.generation.top_p,
            max_retries=self.cfg.generation.max_retries,
        )
        if reply.value is None:
            return fallback_question(slot, state), slot
        text, said = reply.value.question, reply.value.slot
        # The model may drift to another slot: the check below uses the slot it says it asks about; a
        # question about "other" outside Confirmation keeps the chosen target.
        return text, said if said != NO_SLOT or slot == NO_SLOT else slot

    async def propose(self, state: InterviewState, log: UsageRecord) -> Proposal:
        """The next question for ``state`` (phase and opening handled here), with any blocked proposals."""
        events: list[Event] = []
        if not state.asked:
            q = AskedQuestion(0, self.cfg.opening_question, "symptom", state.phase.value, reason="opening")
            return Proposal(events, q)
        skip: set[str] = set()
        last_blocked: dict[str, BlockedQuestion] = {}
        refused: set[str] = set()
        for _ in range(1 + self.cfg.redundancy.max_replacements):
            targets = candidate_slots(state, self.rules, skip)
            if not targets:
                break
            slot = targets[0]
            text, about = await self._phrase(state, slot, last_blocked.get(slot), log)
            if normalise_text(text) in refused or about in skip:
                log.errors.append(
                    f"turn {state.turn} question ({slot}): the model repeated a refused question or slot; "
                    "the slot's plain question was asked instead"
                )
                text, about = fallback_question(slot, state), slot
            verdict = self.checker.check(state, text, about)
            if verdict.ok:
                why = choice_reason(state, self.rules, slot)
                if about != slot:
                    why += f" (target {slot}; the question asks about {about})"
                return Proposal(events, AskedQuestion(state.turn, text, about, state.phase.value, reason=why))
            refused.add(normalise_text(text))
            blocked = BlockedQuestion(state.turn, text, about, str(verdict.reason), verdict.similar_to)
            event = Blocked(blocked)
            events.append(event)
            state = transition(state, event)
            if slot in last_blocked:  # one rephrase per target, then the next slot
                skip.add(slot)
            last_blocked[slot] = blocked
        return Proposal(events, None)
