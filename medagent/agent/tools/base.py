"""What a tool is: a name, an argument model, its own prompt, a rule for repeats, and ``run(ctx)``.

A call the model got wrong (a missing argument, a document that cannot be quoted, a review with nothing
queued) raises ``ToolError``, which the agent turns into an observation; anything else that raises is a bug
or a service failure and propagates. Tools that need the model make their own short LLM call through
``ToolContext.ask`` with the prompt's output model (``medagent.llm.structured``): the documents go to that
call as data, and only judgements and verified quotes come back into the agent's conversation.

A tool class declares ``name``, ``description`` and ``args`` (a pydantic model of its arguments, from which
its function schema is built) and registers itself in ``TOOLS`` under its name when it is defined; a tool
without them fails at import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel

from medagent.agent.episode import Episode
from medagent.agent.memory import MemoryBank
from medagent.agent.services import Reranker, Retriever
from medagent.config import AgentConfig
from medagent.llm.base import ChatModel
from medagent.llm.structured import args_schema, ask
from medagent.prompts import load_feedback, load_prompt
from medagent.registry import Registry
from medagent.types import Question

M = TypeVar("M", bound=BaseModel)


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

    async def ask(self, prompt: str, output: type[M], **variables: Any) -> M | None:
        """A tool's own LLM call on ``prompts/<prompt>.yaml``; the reply as ``output``, or None if malformed
        (the tool then tells the agent it failed)."""
        reply = await ask(
            self.llm,
            load_prompt(prompt).render(**variables),
            output,
            prompt=prompt,
            schema_name=prompt.removeprefix("qa_"),
            json_schema_ok=self.json_schema,
            temperature=self.cfg.sampling.temperature,
            top_p=self.cfg.sampling.top_p,
            max_tokens=self.cfg.loop.tool_max_tokens,
            on_response=self.rec.llm,
        )
        return reply.value

    def say(self, key: str, **variables: Any) -> str:
        """A text for the model from ``prompts/feedback/<agent.loop.feedback>.yaml`` (wording is data)."""
        return load_feedback(self.cfg.loop.feedback).text(key, **variables)

    def options(self) -> dict[str, str] | None:
        """The options a tool shows its own call: the question's, else the model's candidates (open-ended)."""
        q = self.question
        if q.options and not self.cfg.open_ended:
            return dict(q.options)
        return {str(i): c for i, c in enumerate(self.memory.candidates, 1)} or None


class Tool:
    """One tool; subclasses set the class attributes and implement ``run``.

    Attributes:
        name: What the model calls (and the tool's name in ``TOOLS``).
        description: The function's description in ``tools=`` and the agent's prompt.
        args: The pydantic model of its arguments; a field without a default is required.
        parameters: JSON-schema properties of its arguments (built from ``args``).
        required: Required argument names (built from ``args``).
        repeatable: An identical repeat does new work (relevance_analysis opens the next batch each time);
            otherwise an identical repeat of the previous call is refused, not run.
        question_default: Its arguments default to the question being answered, so a constrained call
            leaves them out (a small model would spend hundreds of tokens copying the question).
        searches: It needs the retriever and reranker.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    args: ClassVar[type[BaseModel]]
    parameters: ClassVar[dict[str, Any]] = {}
    required: ClassVar[tuple[str, ...]] = ()
    repeatable: ClassVar[bool] = False
    question_default: ClassVar[bool] = False
    searches: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        missing = [a for a in ("name", "description", "args") if a not in cls.__dict__]
        if missing:
            raise TypeError(f"tool class {cls.__name__} must set {missing}")
        if not (isinstance(cls.args, type) and issubclass(cls.args, BaseModel)):
            raise TypeError(f"{cls.__name__}.args must be a pydantic model, got {cls.args!r}")
        props, required = args_schema(cls.args)
        cls.parameters, cls.required = props, tuple(required)
        TOOLS.add(cls.name, cls)

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        raise NotImplementedError


class NoArgs(BaseModel):
    """The arguments of a tool that takes none."""


TOOLS: Registry[type[Tool]] = Registry("tool")

ToolClass = Callable[[], Tool]
