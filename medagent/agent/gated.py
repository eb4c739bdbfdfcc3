"""The gated agent: answer as the standalone model does when it is sure, search only when it is not.

The QA paper says its agent "dynamically assesses whether external evidence is needed"; with a small model
the tools can hurt more than they help (README, "Search only when it helps", has the measured accuracy and
cost), so the gate makes that assessment explicit and measurable:

1. the first answer is the standalone agent's own call (same prompt, same sampling), with a confidence:
   the chosen letter's probability from token logprobs, or the agreement of k sampled answers
   (``medagent.agent.confidence``);
2. at or above ``agent.gate.threshold`` that answer stands; below it the tool-using agent
   (``agent.gate.tools_mode``) answers the question from scratch, as it would alone;
3. the decision, the confidence and the cost of each part go into one ``gate`` trace step.

With ``agent.gate.record_both`` the tools run on every question and both answers are recorded, so the
report (``medagent.report.gate``) derives accuracy and cost at every threshold from one run; the run's own
prediction is still the gated answer at the configured threshold.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from medagent.agent.base import Agent, build_agent, needs_retrieval, register_agent
from medagent.agent.confidence import agreement, letter_probability
from medagent.agent.episode import Episode, FinalAnswer, Gate, Recorded
from medagent.agent.services import AgentDeps
from medagent.agent.standalone import Attempt, StandaloneAgent
from medagent.config import AgentConfig
from medagent.llm.base import ChatModel
from medagent.llm.usage import UsageRecord
from medagent.types import INVALID, Prediction, Question


def part_cost(attempts: Sequence[Attempt], wall_s: float) -> dict[str, Any]:
    """The cost record of some LLM calls (a part of the gated agent): calls, tokens, wall time."""
    return {
        "llm_calls": len(attempts),
        "prompt_tokens": sum(a.response.usage.prompt_tokens for a in attempts),
        "evaluated_tokens": UsageRecord.of_responses(a.response for a in attempts).evaluated_tokens,
        "completion_tokens": sum(a.response.usage.completion_tokens for a in attempts),
        "wall_s": round(wall_s, 4),
    }


def prediction_cost(pred: Prediction) -> dict[str, Any]:
    """The same record for a whole prediction of another agent (the tools part)."""
    usage = UsageRecord.from_dict(pred.usage)
    return {
        "llm_calls": usage.llm_calls or 0,
        "prompt_tokens": usage.prompt_tokens or 0,
        "evaluated_tokens": usage.evaluated_tokens,
        "completion_tokens": usage.completion_tokens or 0,
        "wall_s": round(pred.latency_s, 4),
    }


class GatedAgent:
    """Standalone first; the tool-using agent only below the confidence threshold (``AgentConfig.gate``).

    Args:
        llm: The chat model of both parts.
        cfg: Agent configuration; ``cfg.gate`` configures the gate, the rest both parts.
        deps: As ``build_agent``'s (retriever, reranker, backend capabilities); ``deps.logprobs`` false
            makes ``confidence: auto`` sample instead.
    """

    def __init__(self, llm: ChatModel, cfg: AgentConfig, deps: AgentDeps) -> None:
        gate = cfg.gate
        self.cfg, self.gate = cfg, gate
        self.first = StandaloneAgent(
            llm,
            dataclasses.replace(cfg, sampling=dataclasses.replace(cfg.sampling, max_tokens=gate.max_tokens)),
            json_schema=deps.json_schema,
        )
        self.tools: Agent = build_agent(dataclasses.replace(cfg, mode=gate.tools_mode), llm, deps)
        logprobs = deps.logprobs
        self.method = gate.confidence if gate.confidence != "auto" else "logprobs" if logprobs else "samples"

    def new_memory(self, question: Question) -> Any:
        """The tools part's memory bank (the worker keeps it by question id), when it has one."""
        new = getattr(self.tools, "new_memory", None)
        return new(question) if new is not None else None

    async def answer(self, question: Question, memory: Any = None) -> Prediction:
        start = time.perf_counter()
        first, samples, confidence, method = await self._first(question)
        first_s = first.response.latency_s
        check_s = time.perf_counter() - start - first_s
        confident = first.answer != INVALID and confidence is not None and confidence >= self.gate.threshold
        decision = "answer" if confident else "tools"
        episode = Episode()
        episode.add(FinalAnswer({**first.fields(), "answer": first.answer}, kind="first_answer"))
        for sample in samples:
            episode.add(FinalAnswer({**sample.fields(), "answer": sample.answer}, kind="confidence_sample"))
        gate = Gate({
            "method": method,
            "confidence": None if confidence is None else round(confidence, 6),
            "threshold": self.gate.threshold,
            "decision": decision,
            "record_both": self.gate.record_both,
            "first_answer": first.answer,
            "first": part_cost([first], first_s),
            "check": part_cost(samples, check_s),
            "tools_answer": None,
            "tools": None,
        })  # fmt: skip
        episode.add(gate)
        usage = _usage([first, *samples])
        if confident and not self.gate.record_both:
            return Prediction(
                id=question.id, benchmark=question.benchmark, answer=first.answer, raw=first.response.content,
                trace=episode.trace(), usage=usage.to_dict(), latency_s=time.perf_counter() - start,
            )  # fmt: skip
        tools = await self._tools(question, memory)
        gate.fields["tools_answer"] = tools.answer
        gate.fields["tools"] = prediction_cost(tools)
        for record in tools.trace:
            episode.add(Recorded(record))
        return Prediction(
            id=question.id,
            benchmark=question.benchmark,
            answer=first.answer if confident else tools.answer,
            raw=first.response.content if confident else tools.raw,
            trace=episode.trace(),
            # Cited evidence belongs to the tools' answer; a confident first answer cites nothing.
            evidence=[] if confident else tools.evidence,
            usage=(usage + UsageRecord.from_dict(tools.usage)).to_dict(),
            latency_s=time.perf_counter() - start,
        )

    async def _first(self, question: Question) -> tuple[Attempt, list[Attempt], float | None, str]:
        """The standalone answer, the samples drawn to judge it, its confidence and how it was measured."""
        options = None if self.cfg.open_ended else question.options
        if self.method == "logprobs" and options:
            first = await self.first.respond(question, top_logprobs=self.gate.top_logprobs)
            confidence = letter_probability(first.response, options)
            if confidence is not None or self.gate.confidence == "logprobs":
                return first, [], confidence, "logprobs" if confidence is not None else "unavailable"
        else:
            first = await self.first.respond(question)
        # No logprobs (backend, open-ended question, or an answer named by its text): k samples.
        samples = list(
            await asyncio.gather(
                *(
                    self.first.respond(
                        question,
                        temperature=self.gate.sample_temperature,
                        top_p=self.gate.sample_top_p,
                        seed=i + 1,
                    )
                    for i in range(self.gate.samples)
                )
            )
        )
        return first, samples, agreement(first.answer, [s.answer for s in samples]), "samples"

    async def _tools(self, question: Question, memory: Any) -> Prediction:
        if getattr(self.tools, "new_memory", None) is None:
            return await self.tools.answer(question)
        return await self.tools.answer(question, memory=memory)  # type: ignore[call-arg]


def _usage(attempts: Sequence[Attempt]) -> UsageRecord:
    return UsageRecord.of_responses(a.response for a in attempts)


def _gated_searches(cfg: AgentConfig) -> bool:
    return needs_retrieval(dataclasses.replace(cfg, mode=cfg.gate.tools_mode))


@register_agent("gated", retrieval=_gated_searches)
def _gated(llm: ChatModel, cfg: AgentConfig, deps: AgentDeps) -> GatedAgent:
    return GatedAgent(llm, cfg, deps)
