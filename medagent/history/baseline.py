"""The paper's baseline: a single-shot assessment from one summary of the whole interview, no questions.

The baseline reads the interview the simulator is grounded in (the physician's questions and the patient's
answers, the physician's closing statement excluded: ``reference.split_interview``), writes one summary
of it and assesses from that summary alone, without follow-up questions and without retrieval (the paper's
"fluent but ungrounded" single-shot LLM). Without a transcript (a person playing the patient) it asks the
opening question once and assesses from that one answer.
"""

from __future__ import annotations

from medagent.config import HistoryAgentConfig
from medagent.history.agent import InterviewResult, Patient
from medagent.history.assessment import assess, summarise
from medagent.history.llmio import CallLog
from medagent.history.state import Answered, Asked, AskedQuestion, InterviewState, transition
from medagent.llm.base import ChatModel
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
        log = CallLog()
        state = InterviewState()
        if transcript is None:
            if patient is None:
                raise ValueError("single_shot needs a transcript or a patient to ask once")
            state = transition(state, Asked(AskedQuestion(0, self.cfg.opening_question, "symptom", "triage")))
            state = transition(state, Answered(await patient.answer(self.cfg.opening_question)))
            transcript = state.transcript()
        if len(transcript) > self.cfg.max_transcript_chars:
            log.errors.append(
                f"transcript cut from {len(transcript)} to {self.cfg.max_transcript_chars} characters"
            )
            transcript = transcript[: self.cfg.max_transcript_chars]
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
            usage=log.to_dict(),
            errors=list(log.errors),
        )
