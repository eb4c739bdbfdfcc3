"""One evaluated interview, start to finish: what an ``InterviewWorker`` actor calls per row.

reference (physician's closing statement) -> the case's facts from the patient's visible turns (cached,
``eval.fact_endpoints``) -> the patient ``eval.patient`` names (the LLM simulator, the replay patient or
the fact patient) -> agent run -> fidelity judge over the LLM simulator's answers -> reference red flags
from the full transcript (agents that track red flags) -> record, with the fact endpoints
(``facts_metrics``).
BERTScore is not computed here: it runs once over all records (``metrics.add_bertscore``) so the scorer
model loads once per run, not per actor.

What the single-shot agent reads is its ``context`` (``SummaryContext``): ``opening`` gives it no transcript, so
it asks the simulated patient the opening question once and assesses from that answer (the baseline of the
paper, Jabbar et al.: the presenting complaint, no follow-up questions); ``full`` hands it the physician's visible interview (an
oracle: the physician already asked everything); ``transcript_run`` hands it the transcript of the amq
agent's own interview of the same patient (read by the driver from a finished run dir).
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from medagent.config import HistoryAgentConfig, InterviewEvalConfig, PatientKind
from medagent.history.agent.amq import HistoryTakingAgent, InterviewResult
from medagent.history.agent.modes import history_mode
from medagent.history.agent.redundancy import TextEmbedder
from medagent.history.agent.single_shot import SingleShotBaseline
from medagent.history.evaluation.facts_metrics import FactMatcher, fact_scores, is_no_answer
from medagent.history.evaluation.metrics import RedFlagExtractor, interview_record
from medagent.history.evaluation.row import InterviewRow
from medagent.history.facts.extract import extract_facts
from medagent.history.facts.store import FactCache, FactSet
from medagent.history.simulation.fact_patient import FactPatient
from medagent.history.simulation.reference import ClosingRule, extract_reference, render_turns, visible_turns
from medagent.history.simulation.replay import ReplayPatient
from medagent.history.simulation.simulator import FidelityJudge, PatientSimulator
from medagent.interview.transcripts import Interview
from medagent.interview.types import Turn
from medagent.llm.base import ChatModel
from medagent.llm.usage import UsageRecord


def arm_name(cfg: HistoryAgentConfig) -> str:
    """The arm of the comparison a config runs, e.g. ``single_shot:opening``, ``amq:no_retrieval``.

    An amq arm names its next-slot policy unless it is the paper's order (``amq:physician``,
    ``amq:information``), so the paper / physician / information arms of one report keep apart.
    """
    mode = history_mode(cfg.mode)
    if mode.reads_context:
        return f"{mode.name}:{cfg.single_shot.context}"
    name = mode.name
    if cfg.questioning.policy == "information":
        name += ":information"
    elif cfg.questioning.priorities != "paper":
        name += f":{cfg.questioning.priorities}"
    return name if cfg.retrieval.enabled else f"{name}:no_retrieval"


def baseline_transcript(cfg: HistoryAgentConfig, seen: str, own_transcript: str | None) -> str | None:
    """The transcript the single-shot agent summarises under ``cfg.single_shot.context`` (None: ask the opening once).

    Raises:
        ValueError: ``transcript_run`` without the amq transcript of this interview.
    """
    if cfg.single_shot.context == "opening":
        return None
    if cfg.single_shot.context == "full":
        return seen
    if not own_transcript:  # context == transcript_run
        raise ValueError("context=transcript_run needs the amq run's transcript of this interview")
    return own_transcript


async def case_facts(
    llm: ChatModel,
    interview_id: str,
    seen: tuple[Turn, ...],
    cfg: InterviewEvalConfig,
    json_schema: bool,
    log: UsageRecord,
) -> FactSet:
    """The interview's fact set: from ``cfg.facts_dir`` when cached there, else extracted (and cached)."""
    return await extract_facts(
        llm,
        interview_id,
        seen,
        model=str(getattr(llm, "model", "") or "unknown"),
        chunk_chars=cfg.facts_chunk_chars,
        max_tokens=cfg.facts_max_tokens,
        concurrency=cfg.facts_concurrency,
        json_schema=json_schema,
        cache=FactCache(Path(cfg.facts_dir)) if cfg.facts_dir else None,
        usage=log,
    )


def build_patient(
    llm: ChatModel,
    seen: tuple[Turn, ...],
    cfg: InterviewEvalConfig,
    embedder: TextEmbedder | None,
    facts: FactSet | None,
) -> PatientSimulator | ReplayPatient | FactPatient:
    """The patient ``cfg.patient`` names, over the visible turns (or the case's facts)."""
    if cfg.patient == PatientKind.simulator:
        return PatientSimulator(llm, seen, cfg, embedder if cfg.simulator_exchanges is not None else None)
    if embedder is None:
        raise ValueError(f"patient={cfg.patient} needs an embedder")
    if cfg.patient == PatientKind.replay:
        return ReplayPatient(
            seen, embedder, cfg.replay_threshold, keys=cfg.replay_keys.value, opening=cfg.replay_opening
        )
    if facts is None:
        raise ValueError("patient=facts needs the case's facts (eval.fact_endpoints=true)")
    return FactPatient(llm, facts, embedder, k=cfg.fact_patient_k, max_tokens=cfg.simulator_max_tokens,
                       temperature=cfg.simulator_temperature)  # fmt: skip


def elicited_texts(cfg: HistoryAgentConfig, transcript: str | None, answers: list[str]) -> list[str] | None:
    """What the arm's interview brought out: the patient's answers; the amq transcript it was handed
    (``transcript_run``); None for the oracle, which read the physician's whole interview."""
    if transcript is None:
        return answers
    return None if cfg.single_shot.context == "full" else [transcript]


def closing_rule(cfg: InterviewEvalConfig) -> ClosingRule:
    return ClosingRule(cfg.closing_min_words, cfg.closing_min_total_words, cfg.closing_max_tail_turns)


async def evaluate_interview(
    interview: Interview,
    agent: HistoryTakingAgent | SingleShotBaseline,
    llm: ChatModel,
    cfg: InterviewEvalConfig,
    *,
    embedder: TextEmbedder | None,
    gold_diagnoses: list[str] | None = None,
    canonical: Any = None,
    skip_unusable: bool = True,
    own_transcript: str | None = None,
) -> InterviewRow:
    """Runs and scores one interview; returns its row (``InterviewRow.to_dict`` is what the run dir holds).

    Args:
        interview: The source interview (its text only; gold diagnoses come separately).
        agent: From ``build_history_agent`` (it holds the agent's LLM, retriever and embedder).
        llm: The model that plays the patient, judges fidelity and extracts reference red flags.
        cfg: Simulator, judge and reference settings.
        embedder: For the simulator's context choice and the redundant-question rate.
        gold_diagnoses: MediTOD gold diagnoses, for the differential hit (None elsewhere).
        canonical: ``text -> [canonical disease names]`` (the ontology's disease lexicon ``names_in``).
        skip_unusable: Return a ``skipped`` row without running the agent when no closing statement is usable.
        own_transcript: The amq agent's transcript of this interview (single_shot, context=transcript_run).

    Raises:
        LLMError: An endpoint failed (the caller records it against the interview).
    """
    reference = extract_reference(interview, closing_rule(cfg))
    row = InterviewRow(interview.id, interview.source, reference.to_dict())
    if skip_unusable and not reference.usable:
        return replace(row, skipped="no usable closing statement")
    seen = visible_turns(interview, reference)
    json_schema = agent.cfg.generation.json_schema
    eval_log = UsageRecord.calls(by_tag=True)
    facts = (
        await case_facts(llm, interview.id, seen, cfg, json_schema, eval_log)
        if cfg.fact_endpoints or cfg.patient == PatientKind.facts
        else None
    )
    simulator = build_patient(llm, seen, cfg, embedder, facts)
    mode = history_mode(agent.cfg.mode)
    transcript = (
        baseline_transcript(agent.cfg, render_turns(seen), own_transcript) if mode.reads_context else None
    )
    result: InterviewResult = await agent.run(simulator, transcript=transcript)
    labels: list[str] = []
    if cfg.judge_fidelity and simulator.log and isinstance(simulator, PatientSimulator):
        judge = FidelityJudge(llm, cfg, json_schema=json_schema, source=seen, embedder=embedder)
        labels = await judge.judge_all(simulator.log, eval_log)
    # Red-flag recall applies only to an agent that tracks red flags: for any other, the reference's
    # extraction over the whole transcript is half of an interview's model time, spent on nothing.
    reference_flags = (
        await RedFlagExtractor(llm, agent.cfg.red_flags, cfg, json_schema=json_schema).extract(
            interview, eval_log
        )
        if mode.tracks_red_flags
        else None
    )
    record = interview_record(
        interview,
        result,
        reference,
        embedder=embedder,
        redundancy_threshold=cfg.redundancy_threshold,
        reference_red_flags=reference_flags,
        gold_diagnoses=gold_diagnoses,
        canonical=canonical,
        fidelity_labels=labels,
    )
    record.patient = str(cfg.patient)
    if len(simulator.log) > 1:
        later = simulator.log[1:]
        record.patient_answered = sum(not is_no_answer(x.answer) for x in later) / len(later)
    if facts is not None and cfg.fact_endpoints and embedder is not None:
        scores = fact_scores(
            facts.facts,
            elicited_texts(agent.cfg, transcript, [x.answer for x in simulator.log]),
            result.assessment.summary,
            FactMatcher(embedder, cfg.fact_match_threshold),
        )
        record = replace(record, **{k: v for k, v in asdict(scores).items()})
    return replace(
        row,
        arm=arm_name(agent.cfg),
        result=result.to_dict(),
        record=record.to_dict(),
        simulator=[asdict(x) | {"label": labels[i] if labels else None} for i, x in enumerate(simulator.log)],
        simulator_usage=simulator.calls.to_dict() | {"errors": simulator.calls.errors},
        eval_usage=eval_log.to_dict() | {"errors": eval_log.errors},
    )
