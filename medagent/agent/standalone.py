"""Seed A's standalone baseline: one zero-shot, direct-response call to the LLM per question."""

from __future__ import annotations

import time
from typing import Any

from medagent.agent.answers import answer_schema, parse_choice
from medagent.agent.base import register_agent
from medagent.config import AgentConfig
from medagent.llm.base import ChatModel
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
        self.json_schema = json_schema and cfg.constrained_answer
        self.prompt_mc = load_prompt(cfg.prompt)
        self.prompt_open = load_prompt(cfg.prompt_open)

    async def answer(self, question: Question) -> Prediction:
        start = time.perf_counter()
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
            temperature=self.cfg.temperature,
            top_p=self.cfg.top_p,
            max_tokens=self.cfg.max_tokens,
        )
        if open_ended:
            answer = resp.content.strip() or INVALID
        else:
            assert question.options is not None
            answer = parse_choice(resp.content, question.options)
        step: dict[str, Any] = {
            "step": 0,
            "kind": "final_answer",
            "latency_s": round(resp.latency_s, 4),
            "prompt_tokens": resp.usage.prompt_tokens,
            "completion_tokens": resp.usage.completion_tokens,
            "finish_reason": resp.finish_reason,
            "constrained": response_format is not None,
        }
        return Prediction(
            id=question.id,
            benchmark=question.benchmark,
            answer=answer,
            raw=resp.content,
            trace=[step],
            usage={
                "prompt_tokens": resp.usage.prompt_tokens,
                "completion_tokens": resp.usage.completion_tokens,
            },
            latency_s=time.perf_counter() - start,
        )


@register_agent("standalone")
def _standalone(llm: ChatModel, cfg: AgentConfig, services: dict[str, Any]) -> StandaloneAgent:
    return StandaloneAgent(llm, cfg, json_schema=bool(services.get("json_schema", True)))
