"""The paper's baseline: a single-shot assessment from one summary, without follow-up questions.

Without a transcript (``context=opening``, the baseline; or a person playing the patient) it asks the
opening question once and summarises that one exchange: the presenting complaint. Given a transcript
(``context=full``: the physician's visible interview, an oracle upper bound; ``context=transcript_run``:
the amq agent's own interview) it summarises that instead. Either way it writes one summary and assesses
from it alone, without retrieval (the paper's "fluent but ungrounded" single-shot LLM). Which transcript it
gets is decided by ``medagent.history.evaluation.runner.baseline_transcript``.
"""

from __future__ import annotations

from medagent.config import HistoryAgentConfig
from medagent.history.agent.amq import InterviewResult, Patient
from medagent.history.agent.assessment import assess, summarise
from medagent.history.agent.modes import register_history_mode
from medagent.history.agent.state import Answered, Asked, AskedQuestion, InterviewState, transition
from medagent.llm.base import ChatModel
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt


class SingleShotBaseline:
    """One summary, one assessment (module docstring).

    Args:
        llm: Any ``ChatModel``.
        cfg: Sampling, token budgets and ``max_transcript_chars``.
    """

    mode = "single_shot"

    def __init__(self, llm: ChatModel, cfg: HistoryAgentConfig) -> None:
        self.llm = llm
        self.cfg = cfg

    async def run(self, patient: Patient | None = None, *, transcript: str | None = None) -> InterviewResult:
        log = UsageRecord.calls(by_tag=True)
        state = InterviewState()
        if transcript is None:
            if patient is None:
                raise ValueError("single_shot needs a transcript or a patient to ask once")
            state = transition(state, Asked(AskedQuestion(0, self.cfg.opening_question, "symptom", "triage")))
            state = transition(state, Answered(await patient.answer(self.cfg.opening_question)))
            transcript = state.transcript()
        if len(transcript) > self.cfg.single_shot.max_transcript_chars:
            log.errors.append(
                f"transcript cut from {len(transcript)} to {self.cfg.single_shot.max_transcript_chars} characters"
            )
            transcript = transcript[: self.cfg.single_shot.max_transcript_chars]
        summary, _ = await summarise(
            self.llm,
            self.cfg,
            load_prompt("history_transcript_summary").render(transcript=transcript),
            tag="single-shot summary",
            log=log,
        )
        if summary is None:  # recorded; the assessment then reads the (cut) transcript itself
            summary = transcript
        assessment = await assess(
            self.llm, self.cfg, summary=summary, findings="(not collected: single-shot)", passages=[], log=log
        )
        return InterviewResult(
            mode=self.mode,
            assessment=assessment,
            final_state=state,
            states=[state],
            finish_reason="single shot",
            usage=log,
            errors=list(log.errors),
        )


register_history_mode(
    "single_shot",
    lambda llm, cfg, _retriever, _embedder: SingleShotBaseline(llm, cfg),
    reads_context=True,
)
