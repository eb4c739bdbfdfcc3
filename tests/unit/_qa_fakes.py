"""Fakes for the QA agent tests: retriever, reranker, and a scripted model that routes by request kind."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from medagent.agent.services import Doc
from medagent.types import Question
from tests.fakes import ScriptedChatModel

Q = Question(
    id="q1",
    text="A 60-year-old man has chest pain after a stent. Which drug is a P2Y12 inhibitor?",
    options={"A": "Aspirin", "B": "Clopidogrel", "C": "Warfarin"},
    benchmark="t",
)


def make_docs(n: int, source: str = "pubmed", prefix: str = "doc") -> list[Doc]:
    return [
        Doc(
            id=f"{prefix}{i}",
            source=source,
            title=f"Title {i}",
            content=f"Document {i} text. Clopidogrel irreversibly blocks the P2Y12 receptor on platelets {i}.",
            score=1.0 / (i + 1),
        )
        for i in range(1, n + 1)
    ]


class FakeRetriever:
    def __init__(self, docs: list[Doc]) -> None:
        self.docs = docs
        self.calls: list[tuple[str, int]] = []

    async def retrieve(
        self,
        query: str,
        top_k: int,
        *,
        sources: list[str] | None = None,
        mode: str | None = None,
        return_parents: bool | None = None,
    ) -> list[Doc]:
        self.calls.append((query, top_k))
        return list(self.docs[:top_k])


class FakeReranker:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    async def rerank(self, query: str, docs: list[Doc], top_r: int) -> list[Doc]:
        self.calls.append((query, len(docs), top_r))
        return list(docs[:top_r])


def reply(
    content: str = "",
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    finish_reason: str = "stop",
    prompt_tokens: int = 10,
    completion_tokens: int = 2,
) -> dict[str, Any]:
    """An OpenAI chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }


def native(name: str, arguments: dict[str, Any] | str, call_id: str = "") -> dict[str, Any]:
    """A reply with one native tool call (``arguments`` as sent: a dict is JSON-encoded)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    call = {"id": call_id or f"n_{name}", "type": "function", "function": {"name": name, "arguments": args}}
    return reply("", [call])


def fenced(name: str, arguments: dict[str, Any], before: str = "", after: str = "") -> dict[str, Any]:
    """A call written as the CPU model writes it: a ```json fence in the text."""
    body = json.dumps({"name": name, "arguments": arguments})
    return reply(f"{before}```json\n{body}\n```{after}")


Handler = Callable[[dict[str, Any]], dict[str, Any]]


# The prompt each kind of call is rendered from (the request's tag); any other call is the final answer.
_KINDS = {
    "qa_agent": "turn",
    "qa_relevance": "relevance",
    "qa_locate": "locate",
    "qa_compare": "compare",
    "qa_generate_options": "options",
}


def kind_of(body: dict[str, Any]) -> str:
    """Which call the agent is making: an agent turn, a tool's own call, or the final answer."""
    return _KINDS.get(str(body.get("prompt", "")), "final")


class AgentModel(ScriptedChatModel):
    """Agent turns come from ``turns`` in order; tool calls and the final call from per-kind handlers."""

    def __init__(self, turns: list[dict[str, Any] | Exception], **handlers: Handler | dict[str, Any]) -> None:
        self.turns = list(turns)
        self.handlers: dict[str, Handler | dict[str, Any]] = {
            "relevance": _relevance_all,
            "locate": _locate_first_sentence,
            "compare": reply(json.dumps({"comparison": [{"option": "B", "verdict": "likely"}]})),
            "options": reply(json.dumps({"options": ["Clopidogrel", "Aspirin"]})),
            "final": reply('{"answer": "B"}'),
            **handlers,
        }
        super().__init__(self._route)

    def _route(self, body: dict[str, Any]) -> dict[str, Any]:
        kind = kind_of(body)
        if kind == "turn":
            item = self.turns.pop(0) if self.turns else reply("")
            if isinstance(item, Exception):
                raise item
            return item
        handler = self.handlers[kind]
        return handler(body) if callable(handler) else handler

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [b for b in self.requests if kind_of(b) == kind]


def doc_ids_in(body: dict[str, Any]) -> list[str]:
    import re

    text = body["messages"][-1]["content"]
    return re.findall(r'<document id="(D\d+)"', text)


def _relevance_all(body: dict[str, Any]) -> dict[str, Any]:
    ids = doc_ids_in(body)
    # The first document of each batch is judged relevant, the others not.
    judged = [
        {"id": h, "relevant": i == 0, "reason": "mentions P2Y12" if i == 0 else "off topic"}
        for i, h in enumerate(ids)
    ]
    return reply(json.dumps({"judgements": judged}))


def _locate_first_sentence(body: dict[str, Any]) -> dict[str, Any]:
    import re

    text = body["messages"][-1]["content"]
    out = []
    for h, content in re.findall(r'<document id="(D\d+)"[^>]*>\n(.*?)\n</document>', text, re.S):
        sentence = content.split(". ")[1] if ". " in content else content
        out.append({"id": h, "quote": sentence.rstrip(".") + "."})
    return reply(json.dumps({"evidence": out}))
