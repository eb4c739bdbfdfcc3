"""Ray Data callable class that runs the history-taking agent on batches of interviews.

One long-lived actor holds the LLM client, the agent (``amq`` or ``single_shot``), the sentence embedder
and the guideline retriever client; ``__call__`` is a coroutine, so Ray Data runs the actor as an async
actor and interviews from several batches run concurrently up to ``agent.max_concurrency``. Per interview
it calls ``medagent.history.evaluation.runner.evaluate_interview`` (simulator grounded in that interview -> agent ->
fidelity judge -> reference red flags -> record). An endpoint failure (``LLMError``, including the
retriever's ``ServiceError``) becomes the row's ``error``; any other exception is a bug and propagates.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import replace
from typing import Any

from actors.common import (
    chat_model_for,
    retriever_for,
    text_embedder,
    validate_columns,
    worker_logging,
)
from actors.metrics import meters
from medagent.config import HistoryAgentConfig, InterviewEvalConfig, LLMConfig, to_dataclass
from medagent.history import build_history_agent, needs_history_retrieval, reads_asking_transcript
from medagent.history.evaluation.row import InterviewRow
from medagent.history.evaluation.runner import arm_name, closing_rule, evaluate_interview
from medagent.history.simulation.reference import extract_reference
from medagent.interview.transcripts import Interview
from medagent.llm.base import LLMError
from medagent.llm.endpoints import LLMEndpoint, ServicesEndpoint

log = logging.getLogger(__name__)

REQUIRED_INPUT_KEYS = ("id", "interview")
# Optional columns: ``transcript``, the amq agent's own transcript (single_shot with context=transcript_run);
# ``arms``, the JSON list of arms still to run on the interview (a worker built with ``arms``).


def validate_inputs(batch: dict[str, Any], stage: str = "InterviewWorker") -> None:
    validate_columns(batch, REQUIRED_INPUT_KEYS, stage)


def error_row(interview: Interview, mode: str, cfg: InterviewEvalConfig, exc: Exception) -> InterviewRow:
    """The row of an interview whose endpoint failed: the reference is kept so the failure is countable."""
    return InterviewRow(
        interview.id,
        interview.source,
        extract_reference(interview, closing_rule(cfg)).to_dict(),
        mode=mode,
        error=f"{type(exc).__name__}: {exc}",
    )


class InterviewWorker:
    """``map_batches`` UDF: ``id``, ``interview`` (JSON of an ``Interview``) -> ``id``, ``row`` (JSON).

    Args:
        agent: ``HistoryAgentConfig`` as a dict.
        eval: ``InterviewEvalConfig`` as a dict (simulator, judge, reference rule).
        llm: ``LLMConfig`` as a dict.
        llm_endpoint: Where the LLM is (``actors.backends.llm_endpoint``).
        services_endpoint: Where the guideline retriever is (``actors.builder.services_endpoint``); None for
            the single-shot baseline, which retrieves nothing.
        embedder: ``ModelConfig`` of the sentence encoder as a dict (None: no semantic checks).
        gold_diagnoses: Interview id -> annotated diagnoses (MediTOD), for the differential hit rate. They
            go to the scorer only, never to the agent or the simulated patient.
        data_root: Where the MediTOD ontology is (its disease lexicon canonicalises diagnoses); used only
            with ``gold_diagnoses``.
        arms: Arm name -> ``HistoryAgentConfig`` dict: every arm runs on each interview in turn, in this
            order (an arm reading ``transcript_run`` gets the transcript of the asking arm before it), and
            each row comes back with its arm's name (``pipelines.run_interviews.run_arms``).
    """

    def __init__(
        self,
        agent: dict[str, Any],
        eval: dict[str, Any],
        llm: dict[str, Any],
        llm_endpoint: LLMEndpoint,
        services_endpoint: ServicesEndpoint | None = None,
        embedder: dict[str, Any] | None = None,
        gold_diagnoses: dict[str, list[str]] | None = None,
        data_root: str | None = None,
        arms: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        worker_logging(log)
        self.agent_cfg: HistoryAgentConfig = to_dataclass(HistoryAgentConfig, agent)
        self.eval_cfg: InterviewEvalConfig = to_dataclass(InterviewEvalConfig, eval)
        self.llm_cfg: LLMConfig = to_dataclass(LLMConfig, llm)
        # The JSON-schema switch follows the served model, not the agent file.
        self.agent_cfg.generation.json_schema = (
            self.agent_cfg.generation.json_schema and self.llm_cfg.supports_json_schema
        )
        self.llm = chat_model_for(self.llm_cfg, llm_endpoint)
        self.embedder = text_embedder(embedder)
        if self.embedder is None and self.eval_cfg.simulator_exchanges is not None:
            raise ValueError(
                "embedder=null needs eval.simulator_exchanges=null (the simulator then reads it all)"
            )
        self.agent = self._build(self.agent_cfg, services_endpoint)
        self.arms: dict[str, tuple[HistoryAgentConfig, Any]] = {}
        for name, arm in (arms or {}).items():
            cfg = to_dataclass(HistoryAgentConfig, arm)
            cfg.generation.json_schema = cfg.generation.json_schema and self.llm_cfg.supports_json_schema
            self.arms[name] = (cfg, self._build(cfg, services_endpoint))
        self._sem = asyncio.Semaphore(self.agent_cfg.max_concurrency)
        self.gold = gold_diagnoses or {}
        self.canonical = None
        if self.gold:
            from medagent.interview.annotate.vocab import build_disease_lexicon
            from medagent.interview.meditod import load_ontology

            self.canonical = build_disease_lexicon(load_ontology(data_root)).names_in

    def _build(self, cfg: HistoryAgentConfig, services_endpoint: ServicesEndpoint | None) -> Any:
        retriever = retriever_for(services_endpoint) if needs_history_retrieval(cfg) else None
        return build_history_agent(cfg, self.llm, retriever, self.embedder)

    async def _one(
        self,
        interview: Interview,
        own_transcript: str | None = None,
        arm: tuple[HistoryAgentConfig, Any] | None = None,
    ) -> dict[str, Any]:
        agent_cfg, agent = arm or (self.agent_cfg, self.agent)
        async with self._sem:
            # One line per interview in the worker's log (the dashboard's Logs tab): a CPU interview takes
            # minutes and the run's progress bar only moves when a batch ends.
            log.info("interview %s: started (%s)", interview.id, arm_name(agent_cfg))
            start = time.perf_counter()
            try:
                row = await evaluate_interview(
                    interview,
                    agent,
                    self.llm,
                    self.eval_cfg,
                    embedder=self.embedder,
                    gold_diagnoses=self.gold.get(interview.id),
                    canonical=self.canonical,
                    own_transcript=own_transcript,
                )
            except LLMError as exc:
                row = error_row(interview, agent_cfg.mode, self.eval_cfg, exc)
            row = replace(
                row,
                mode=agent_cfg.mode,
                arm=arm_name(agent_cfg),
                elapsed_s=round(time.perf_counter() - start, 3),
            )
            out = row.to_dict()
            meters().interview(out)
            log.info("interview %s: %s in %.0f s", interview.id, row.outcome(), row.elapsed_s)
            return out

    async def _arms(
        self, interview: Interview, names: list[str], transcript: str | None
    ) -> list[tuple[str, dict[str, Any]]]:
        """Every arm of ``names`` on one interview, in order; the first asking arm's transcript (or
        ``transcript``, that arm's from an earlier attempt) feeds the arms after it that summarise a transcript
        (``single_shot.context=transcript_run``)."""
        from medagent.history import history_mode
        from medagent.history.agent.state import InterviewState

        out = []
        transcript = transcript or None
        asked = transcript is not None
        asker_failed = False
        for name in names:
            cfg, agent = self.arms[name]
            reads = reads_asking_transcript(cfg)
            if reads and asker_failed:
                # Nothing to summarise: counted as an endpoint failure, so the next run asks both arms again.
                exc = LLMError("the asking arm's interview failed, so there is no transcript to summarise")
                failed = error_row(interview, cfg.mode, self.eval_cfg, exc)
                out.append((name, replace(failed, arm=arm_name(cfg), elapsed_s=0.0).to_dict()))
                continue
            row = await self._one(interview, transcript if reads else None, (cfg, agent))
            result = row.get("result")
            if history_mode(cfg.mode).asks_questions and not asked:
                asked = True
                if result and not row.get("error"):
                    transcript = InterviewState.from_dict(result["final_state"]).transcript()
                asker_failed = bool(row.get("error"))
            out.append((name, row))
        return out

    async def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        validate_inputs(batch)
        interviews = [Interview.from_json(s) for s in batch["interview"]]
        transcripts = list(batch["transcript"]) if "transcript" in batch else [None] * len(interviews)
        if "arms" in batch:
            runs = await asyncio.gather(
                *(
                    self._arms(iv, json.loads(a), t)
                    for iv, a, t in zip(interviews, batch["arms"], transcripts, strict=True)
                )
            )
            pairs = [
                (iv.id, name, row) for iv, run in zip(interviews, runs, strict=True) for name, row in run
            ]
            return {
                "id": [i for i, _, _ in pairs],
                "arm_key": [n for _, n, _ in pairs],
                "row": [json.dumps(r, ensure_ascii=False) for _, _, r in pairs],
            }
        rows = await asyncio.gather(
            *(self._one(iv, t) for iv, t in zip(interviews, transcripts, strict=True))
        )
        return {
            "id": [iv.id for iv in interviews],
            "row": [json.dumps(r, ensure_ascii=False) for r in rows],
        }
