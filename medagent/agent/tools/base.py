"""What a tool is: a name, an OpenAI function schema, its own prompt, a rule for repeats, and ``run(ctx)``.

A call the model got wrong (a missing argument, a document that cannot be quoted, a review with nothing
queued) raises ``ToolError``, which the agent turns into an observation; anything else that raises is a bug
or a service failure and propagates. Tools that need the model make their own short LLM call through
``ToolContext.ask``: the documents go to that call as data, and only judgements and verified quotes come
back into the agent's conversation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from medagent.agent.episode import Episode
from medagent.agent.memory import MemoryBank
from medagent.agent.services import Reranker, Retriever
from medagent.agent.toolcalls import decode_json
from medagent.config import AgentConfig
from medagent.llm.base import ChatModel
from medagent.prompts import load_feedback, load_prompt
from medagent.types import Question

STR: dict[str, Any] = {"type": "string"}


@dataclass
class ToolResult:
    """What the model sees (``content``) and what the trace keeps (``summary``)."""

    content: str
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolContext:
    """Everything one tool call may use: the question, its memory bank and trace, the agent's services."""

    question: Question
    memory: MemoryBank
    rec: Episode  # where the call's LLM and retrieval use is counted
    llm: ChatModel
    cfg: AgentConfig
    memory_kind: str
    retriever: Retriever | None = None
    reranker: Reranker | None = None
    json_schema: bool = True

    async def ask(self, prompt: str, schema: dict[str, Any], **variables: Any) -> Any:
        """A tool's own LLM call on ``prompts/<prompt>.yaml``; the decoded JSON reply, or None if not JSON."""
        fmt = None
        if self.json_schema:
            name = prompt.removeprefix("qa_")
            fmt = {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}
        resp = await self.llm.chat(
            load_prompt(prompt).render(**variables),
            response_format=fmt,
            temperature=self.cfg.temperature,
            top_p=self.cfg.top_p,
            max_tokens=self.cfg.tool_max_tokens,
        )
        self.rec.llm(resp)
        fence = re.search(r"```(?:json)?\s*(.*?)```", resp.content, re.S)
        value, err = decode_json(fence.group(1) if fence else resp.content)
        return None if err else value

    def say(self, key: str, **variables: Any) -> str:
        """A text for the model from ``prompts/feedback/qa_tools.yaml`` (wording is data, not code)."""
        return load_feedback("qa_tools").text(key, **variables)

    def options(self) -> dict[str, str] | None:
        """The options a tool shows its own call: the question's, else the model's candidates (open-ended)."""
        q = self.question
        if q.options and not self.cfg.open_ended:
            return dict(q.options)
        return {str(i): c for i, c in enumerate(self.memory.candidates, 1)} or None


class Tool:
    """One tool; subclasses set the class attributes and implement ``run``.

    Attributes:
        name: What the model calls.
        description: The function's description in ``tools=`` and the agent's prompt.
        parameters: JSON-schema properties of its arguments.
        required: Required argument names.
        repeatable: An identical repeat does new work (relevance_analysis opens the next batch each time);
            otherwise an identical repeat of the previous call is refused, not run.
        question_default: Its arguments default to the question being answered, so a constrained call
            leaves them out (a small model would spend hundreds of tokens copying the question).
        searches: It needs the retriever and reranker.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]] = {}
    required: ClassVar[tuple[str, ...]] = ()
    repeatable: ClassVar[bool] = False
    question_default: ClassVar[bool] = False
    searches: ClassVar[bool] = False

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        raise NotImplementedError


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def arr(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


ToolClass = Callable[[], Tool]
