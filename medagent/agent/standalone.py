"""The QA paper's standalone baseline: one zero-shot, direct-response call to the LLM per question."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from medagent.agent.answers import answer_schema, parse_choice
from medagent.agent.base import register_agent
from medagent.agent.episode import Episode, FinalAnswer
from medagent.agent.services import AgentDeps
from medagent.agent.trace import call_fields
from medagent.config import AgentConfig
from medagent.llm.base import ChatModel, ChatResponse
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt
from medagent.types import INVALID, Prediction, Question


class StandaloneAgent:
    """Answers with a single chat call: no tools, no retrieval.

    Multiple-choice questions get the options and (when the backend supports it) a JSON schema that
    constrains the reply to one of the option letters; open-ended questions get a free-text answer.
    """

    def __init__(self, llm: ChatModel, cfg: AgentConfig, *, json_schema: bool = True) -> None:
        self.llm = llm
        self.cfg = cfg
        self.json_schema = json_schema and cfg.answer.constrained_answer
        self.prompt_mc = load_prompt(cfg.prompt)
        self.prompt_open = load_prompt(cfg.prompt_open)

    async def answer(self, question: Question) -> Prediction:
        start = time.perf_counter()
        attempts: list[Attempt] = []
        for temperature, top_p in self.cfg.answer_sampling():
            attempts.append(await self.respond(question, temperature=temperature, top_p=top_p))
            if attempts[-1].answer != INVALID:
                break
        episode = Episode()
        for i, a in enumerate(attempts):
            retry = (
                {"retry": True} if i else {}
            )  # the QA paper's re-run of an unreadable answer (agent.answer.retry_invalid)
            kind = "final_answer" if a is attempts[-1] else "invalid_answer"
            episode.add(FinalAnswer({**a.fields(), **retry}, kind=kind))
        final = attempts[-1].response
        return Prediction(
            id=question.id,
            benchmark=question.benchmark,
            answer=attempts[-1].answer,
            raw=final.content,
            trace=episode.trace(),
            usage=UsageRecord.of_responses((a.response for a in attempts), by_tag=True).to_dict(),
            latency_s=time.perf_counter() - start,
        )

    async def respond(
        self,
        question: Question,
        *,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        top_logprobs: int | None = None,
    ) -> Attempt:
        """One direct-response call and its parsed answer; sampling defaults to the config's."""
        open_ended = self.cfg.open_ended or not question.options
        if open_ended:
            messages = self.prompt_open.render(question=question.text)
            response_format = None
        else:
            assert question.options is not None
            messages = self.prompt_mc.render(question=question.text, options=question.options)
            response_format = answer_schema(sorted(question.options)) if self.json_schema else None
        resp = await self.llm.chat(
            messages,
            response_format=response_format,
            temperature=self.cfg.sampling.temperature if temperature is None else temperature,
            top_p=self.cfg.sampling.top_p if top_p is None else top_p,
            max_tokens=self.cfg.sampling.max_tokens,
            seed=seed,
            top_logprobs=top_logprobs,
            prompt=(self.prompt_open if open_ended else self.prompt_mc).name,
        )
        if open_ended:
            answer = resp.content.strip() or INVALID
        else:
            assert question.options is not None
            answer = parse_choice(resp.content, question.options)
        return Attempt(answer, resp, response_format is not None)


@dataclass(frozen=True)
class Attempt:
    """One direct-response call: the parsed answer, the response, whether decoding was constrained."""

    answer: str
    response: ChatResponse
    constrained: bool

    def fields(self) -> dict[str, Any]:
        """Its trace fields (those the standalone agent has always written)."""
        return {**call_fields(self.response), "constrained": self.constrained}


@register_agent("standalone")
def _standalone(llm: ChatModel, cfg: AgentConfig, deps: AgentDeps) -> StandaloneAgent:
    return StandaloneAgent(llm, cfg, json_schema=deps.json_schema)
