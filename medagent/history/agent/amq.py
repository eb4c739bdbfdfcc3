"""The history-taking agent ("adaptive Markov questioning", Jabbar et al.): a state machine over ``InterviewState``.

One turn: ``next_question`` (policy + redundancy control; ``None`` when the interview should end) ->
the patient answers -> ``observe`` (pre-processing update, then the phase machine). At the end ``finish``
writes the clinical summary, retrieves guideline passages (parent–child, hybrid) and produces the
assessment. ``run`` drives these steps against any patient; an HTTP session calls them one by one so a
person can play the patient (the state is plain data: ``InterviewState.to_dict`` / ``from_dict``).

Errors: a model's malformed output is recorded in the state and handled (see ``preprocess``, ``policy``,
``assessment``); an endpoint failure (``LLMError``) or a retriever failure propagates to the caller, which
records it against the interview.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from medagent.config import HistoryAgentConfig
from medagent.history.agent.assessment import Assessment, assess, retrieve_passages, summarise
from medagent.history.agent.grounding import Grounding
from medagent.history.agent.modes import history_mode, register_history_mode
from medagent.history.agent.phases import Rules, completeness, entropy, finish_reason, next_phase
from medagent.history.agent.policy import QuestionPolicy
from medagent.history.agent.preprocess import preprocess, render_differential, slot_table
from medagent.history.agent.redundancy import RedundancyChecker, TextEmbedder
from medagent.history.agent.state import (
    SLOT_BY_NAME,
    Answered,
    Asked,
    AskedQuestion,
    Event,
    InterviewState,
    PhaseChanged,
    event_to_dict,
    transition,
)
from medagent.llm.base import ChatModel
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt
from medagent.services import Retriever


@runtime_checkable
class Patient(Protocol):
    """Anything that answers the agent's questions: the LLM simulator, a scripted fake, a person over HTTP."""

    async def answer(self, question: str) -> str: ...


@dataclass(frozen=True)
class TurnRecord:
    """One turn of the log: the question, the answer and the state's scores after the update."""

    turn: int
    phase: str
    slot: str
    question: str
    answer: str
    completeness: float
    entropy: float
    red_flags: tuple[str, ...]
    blocked: int
    phase_after: str
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class InterviewResult:
    """Everything one interview produced.

    Attributes:
        mode: ``amq`` or ``single_shot``.
        assessment: The final assessment.
        final_state: The state at the end (single_shot: the initial state).
        states: The state after each turn (the initial state first).
        events: Every transition, in order (``state.replay`` rebuilds every state from them).
        turns: Turn log.
        finish_reason: Why questioning stopped.
        usage: Model calls, tokens and latency.
        errors: Handled problems (malformed replies...), in order.
    """

    mode: str
    assessment: Assessment
    final_state: InterviewState
    states: list[InterviewState] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    finish_reason: str = ""
    usage: UsageRecord = field(default_factory=UsageRecord)
    errors: list[str] = field(default_factory=list)

    @property
    def n_turns(self) -> int:
        """Questions asked (single_shot: 1, its one assessment turn)."""
        return len(self.final_state.asked) if history_mode(self.mode).asks_questions else 1

    @property
    def blocked(self) -> int:
        return len(self.final_state.blocked)

    def to_dict(self, *, with_states: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "mode": self.mode,
            "n_turns": self.n_turns,
            "blocked": self.blocked,
            "finish_reason": self.finish_reason,
            "assessment": self.assessment.to_dict(),
            "final_state": self.final_state.to_dict(),
            "turns": [t.to_dict() for t in self.turns],
            "events": [event_to_dict(e) for e in self.events],
            "usage": self.usage.to_dict(),
            "errors": list(self.errors),
        }
        if with_states:
            d["states"] = [s.to_dict() for s in self.states]
        return d


@dataclass(frozen=True)
class Step:
    """One turn's decision: the state with ``question`` asked (pending), or ``question=None`` and why the
    interview ends (``finish_reason``)."""

    state: InterviewState
    question: AskedQuestion | None
    finish_reason: str = ""


def findings_text(state: InterviewState) -> str:
    """Gathered slots, differential and red flags as plain lines (prompt input and fallback summary)."""
    lines = [f"- {SLOT_BY_NAME[k].name}: {v.value}" for k, v in state.slots.items()]
    if state.differential:
        lines.append(
            "Differential: " + "; ".join(f"{h.diagnosis} ({h.probability:.2f})" for h in state.differential)
        )
    if state.red_flags:
        lines.append("Red flags: " + ", ".join(state.red_flags))
    return "\n".join(lines) or "(nothing gathered)"


class HistoryTakingAgent:
    """Adaptive history taking (module docstring).

    Args:
        llm: Any ``ChatModel`` (Serve handle, HTTP endpoint, scripted fake).
        cfg: Thresholds, budget, priorities, red flags, sampling.
        retriever: Guideline retrieval (``medagent.services.Retriever``); None skips retrieval and the
            assessment is marked ``grounded=False``.
        embedder: For the semantic redundancy check and the grounding check of slot values (required: without
            it no slot could be grounded).
    """

    mode = "amq"

    def __init__(
        self,
        llm: ChatModel,
        cfg: HistoryAgentConfig,
        retriever: Retriever | None = None,
        embedder: TextEmbedder | None = None,
    ) -> None:
        if not history_mode(cfg.mode).asks_questions:
            raise ValueError(
                f"HistoryTakingAgent runs mode 'amq', got {cfg.mode!r} (see build_history_agent)"
            )
        self.llm = llm
        self.cfg = cfg
        self.retriever = retriever
        self.rules = Rules.from_config(cfg)
        if embedder is None:
            raise ValueError("the amq agent needs a sentence embedder: slot values are grounded with it")
        self.grounding = Grounding(
            embedder, cfg.red_flags, cfg.grounding.similarity_threshold, cfg.grounding.top_k
        )
        self.checker = RedundancyChecker(embedder, cfg.redundancy.similarity_threshold)
        self.policy = QuestionPolicy(llm, self.rules, self.checker)

    # ------------------------------------------------------------------------------------- step API
    def start(self) -> InterviewState:
        return InterviewState()

    def done_reason(self, state: InterviewState) -> str | None:
        """Why the interview should end now, or None."""
        return finish_reason(state, self.rules)

    def scores(self, state: InterviewState) -> dict[str, float]:
        return {
            "completeness": completeness(state, self.rules.weights),
            "entropy": entropy(state.differential),
        }

    async def next_question(
        self, state: InterviewState, *, events: list[Event] | None = None, log: UsageRecord | None = None
    ) -> tuple[InterviewState, AskedQuestion | None]:
        """The state with the next question asked (pending), or ``(state, None)`` when it should end.

        Blocked proposals are recorded in the returned state either way.
        """
        if state.pending is not None:
            raise ValueError("the last question has no answer yet; call observe() first")
        if self.done_reason(state):
            return state, None
        proposal = await self.policy.propose(state, log or UsageRecord.calls(by_tag=True))
        for e in proposal.events:
            state = self._apply(state, e, events)
        if proposal.question is None:
            return state, None
        return self._apply(state, Asked(proposal.question), events), proposal.question

    async def observe(
        self,
        state: InterviewState,
        answer: str,
        *,
        events: list[Event] | None = None,
        log: UsageRecord | None = None,
    ) -> InterviewState:
        """Records the answer to the pending question, runs pre-processing and moves the phase."""
        state = self._apply(state, Answered(" ".join(answer.split())), events)
        update = await preprocess(
            self.llm, state, self.cfg, log or UsageRecord.calls(by_tag=True), self.grounding
        )
        state = self._apply(state, update, events)
        move = next_phase(state, self.rules)
        if move is not None:
            state = self._apply(state, PhaseChanged(*move), events)
        return state

    async def finish(self, state: InterviewState, *, log: UsageRecord | None = None) -> Assessment:
        """Clinical summary -> guideline retrieval -> grounded assessment."""
        log = log or UsageRecord.calls(by_tag=True)
        messages = load_prompt("history_summary").render(
            transcript=state.transcript(),
            summary=state.summary,
            slots=slot_table(state),
            differential=render_differential(state),
            red_flags=[f"{f}: {self.cfg.red_flags.get(f, f)}" for f in state.red_flags],
        )
        summary, errors = await summarise(self.llm, self.cfg, messages, tag="clinical summary", log=log)
        if summary is None:  # recorded; the running summary (or the findings) still make a usable query
            summary = state.summary or findings_text(state)
        passages = await retrieve_passages(self.retriever, summary, self.cfg) if self.retriever else []
        result = await assess(
            self.llm, self.cfg, summary=summary, findings=findings_text(state), passages=passages, log=log
        )
        if errors:
            result = replace(result, errors=(*errors, *result.errors))
        return result

    async def step(
        self, state: InterviewState, *, events: list[Event] | None = None, log: UsageRecord | None = None
    ) -> Step:
        """The next question to put, or why the interview ends: the one decision of every turn, made here
        for both the batch run (``run``) and the HTTP sessions (``medagent.history.live.sessions``)."""
        reason = self.done_reason(state)
        if reason:
            return Step(state, None, reason)
        state, question = await self.next_question(state, events=events, log=log)
        if question is None:
            return Step(state, None, "no acceptable question left")
        return Step(state, question)

    # -------------------------------------------------------------------------------------- run API
    async def run(self, patient: Patient, *, transcript: str | None = None) -> InterviewResult:
        """Interviews ``patient`` to completion and assesses (``transcript`` is ignored: the agent asks)."""
        del transcript
        log = UsageRecord.calls(by_tag=True)
        events: list[Event] = []
        state = self.start()
        states = [state]
        turns: list[TurnRecord] = []
        while True:
            blocked_before = len(state.blocked)
            step = await self.step(state, events=events, log=log)
            state, question = step.state, step.question
            if question is None:
                break
            phase = state.phase.value
            answer = await patient.answer(question.text)
            state = await self.observe(state, answer, events=events, log=log)
            states.append(state)
            s = self.scores(state)
            turns.append(
                TurnRecord(
                    turn=question.turn,
                    phase=phase,
                    slot=question.slot,
                    question=question.text,
                    answer=state.asked[-1].answer or "",
                    completeness=round(s["completeness"], 4),
                    entropy=round(s["entropy"], 4),
                    red_flags=state.red_flags,
                    blocked=len(state.blocked) - blocked_before,
                    phase_after=state.phase.value,
                    reason=question.reason,
                )
            )
        assessment = await self.finish(state, log=log)
        return InterviewResult(
            mode=self.mode,
            assessment=assessment,
            final_state=state,
            states=states,
            events=events,
            turns=turns,
            finish_reason=step.finish_reason,
            usage=log,
            errors=list(log.errors),
        )

    @staticmethod
    def _apply(state: InterviewState, event: Event, sink: list[Event] | None) -> InterviewState:
        if sink is not None:
            sink.append(event)
        return transition(state, event)


register_history_mode(
    "amq",
    HistoryTakingAgent,
    asks_questions=True,
    tracks_red_flags=True,
    retrieval=lambda cfg: cfg.retrieval.enabled,
)
