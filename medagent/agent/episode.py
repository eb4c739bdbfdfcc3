"""One question's episode as typed steps, each writing its chat messages and its trace record.

After smolagents' ``memory.py``: the conversation the model sees and the audit trace come from the same
list of steps, so they cannot drift apart. ``Episode.messages`` is the prompt plus every step's messages;
``Episode.trace()`` is every step's record, numbered. The episode also counts what the question cost (LLM
and retrieval calls, tokens, time), which tools add to through ``llm`` / ``retrieval``.

Steps:
- ``ModelTurn``: one agent turn (an assistant message, with its native tool calls);
- ``ToolStep``: one tool call, run or refused (a ``tool`` message for a native call);
- ``Observation``: text sent back to the model: feedback on its turn (recorded with its ``error`` kind) or
  the results of calls written in the text (a message only);
- ``FinalAnswer``: an answer call (``final_answer``; ``invalid_answer`` for an unreadable one that was
  retried; the gated agent's ``first_answer`` and ``confidence_sample``);
- ``MemorySnapshot``: the memory bank's counts when the question ended;
- ``Retrieval``: a search made for the prompt (the no-tool baseline); ``Gate``: the gated agent's decision;
- ``Recorded``: a record taken over from another agent's trace (the gated agent's tools part).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from medagent.agent.provenance import RETRIEVED
from medagent.agent.toolcalls import Call
from medagent.agent.trace import Counts, preview
from medagent.llm.base import ChatResponse
from medagent.llm.usage import UsageRecord

# Characters per token before the backend has reported a count (English prose runs about 4).
CHARS_PER_TOKEN = 4.0


class Step:
    """A step of an episode: what it adds to the conversation, and its trace record (None: none)."""

    def messages(self) -> list[dict[str, Any]]:
        return []

    def record(self) -> dict[str, Any] | None:
        raise NotImplementedError


@dataclass
class ModelTurn(Step):
    """One agent turn. ``content`` is what the conversation keeps (a cut-off reply is shortened by the
    agent); ``llm`` the call's trace fields (``Episode.llm``)."""

    content: str
    llm: dict[str, Any]
    calls: list[Call] = field(default_factory=list)
    reply: str = ""  # the full reply, for the trace preview

    def messages(self) -> list[dict[str, Any]]:
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        native = [c for c in self.calls if c.origin == "native"]
        if native:
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in native
            ]
        return [msg]

    def record(self) -> dict[str, Any]:
        return {
            "kind": "model",
            **self.llm,
            "content": preview(self.reply),
            "calls": [c.name for c in self.calls],
        }


@dataclass
class ToolStep(Step):
    """One tool call: ``content`` is what the model is told, ``summary`` what the trace keeps of a run."""

    call: Call
    content: str
    ok: bool = False
    executed: bool = False
    summary: dict[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0
    usage: dict[str, Any] = field(default_factory=dict)  # the tool's own LLM/retrieval calls (Episode.delta)

    def messages(self) -> list[dict[str, Any]]:
        # A call written in the text gets its result as text, gathered by the agent into one Observation.
        if self.call.origin != "native":
            return []
        return [{"role": "tool", "tool_call_id": self.call.id, "content": self.content}]

    def record(self) -> dict[str, Any]:
        # A search's documents (medagent.agent.provenance) are kept whole: the preview would cut the list.
        summary = dict(self.summary)
        retrieved = summary.pop(RETRIEVED, None)
        return {
            "kind": "tool",
            "tool": self.call.name,
            "arguments": preview(self.call.arguments),
            "origin": self.call.origin,
            "ok": self.ok,
            # Whether the tool itself ran: refused calls (bad JSON, repeats, unknown tools, over the per-reply
            # limit) are traced too, and Fig. 2 counts them apart from the executed ones.
            "executed": self.executed,
            "result": preview(summary or self.content),
            **({RETRIEVED: retrieved} if retrieved is not None else {}),
            "latency_s": round(self.latency_s, 4),
            **self.usage,
        }


@dataclass
class Observation(Step):
    """Text for the model as a user message; ``error`` names the feedback kind (traced), None for tool
    results written back as text (not traced: each has its ``ToolStep``)."""

    text: str
    error: str | None = None

    def messages(self) -> list[dict[str, Any]]:
        return [{"role": "user", "content": self.text}]

    def record(self) -> dict[str, Any] | None:
        return (
            None
            if self.error is None
            else {"kind": "observation", "error": self.error, "message": preview(self.text)}
        )


@dataclass
class _Fields(Step):
    """A step that is a trace record only: ``kind`` and its fields, in order."""

    fields: dict[str, Any] = field(default_factory=dict)
    kind: str = ""

    def record(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.fields}


@dataclass
class FinalAnswer(_Fields):
    kind: str = "final_answer"


@dataclass
class MemorySnapshot(_Fields):
    kind: str = "memory"


@dataclass
class Retrieval(_Fields):
    kind: str = "retrieval"


@dataclass
class Gate(_Fields):
    kind: str = "gate"


@dataclass
class Recorded(Step):
    """A record from another agent's trace, kept as it is (renumbered in this episode's trace)."""

    data: dict[str, Any]

    def record(self) -> dict[str, Any]:
        return {k: v for k, v in self.data.items() if k != "step"}


@dataclass
class Episode:
    """The steps of one question, the conversation they make, and what the question cost.

    Args:
        prompt: The rendered instructions and question the conversation starts from.
        schemas: Tool schemas sent with every turn (counted in the token estimate).
    """

    prompt: list[dict[str, Any]] = field(default_factory=list)
    schemas: list[dict[str, Any]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    tool_calls: int = 0
    # Tokens per character, recalibrated from every usage report.
    tpc: float = 1.0 / CHARS_PER_TOKEN

    def add(self, step: Step) -> Step:
        self.steps.append(step)
        return step

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [*self.prompt, *(m for s in self.steps for m in s.messages())]

    def trace(self) -> list[dict[str, Any]]:
        records = [r for s in self.steps if (r := s.record()) is not None]
        return [{"step": i, **r} for i, r in enumerate(records)]

    # ------------------------------------------------------------------------------------------ cost
    def llm(self, resp: ChatResponse) -> dict[str, Any]:
        """Counts one LLM call; returns its trace fields."""
        return self.counts.add(resp)

    def retrieval(self, seconds: float) -> None:
        self.counts.retrieval_calls += 1
        self.counts.retrieval_s += seconds

    def snapshot(self) -> Counts:
        return self.counts.copy()

    def delta(self, before: Counts) -> dict[str, Any]:
        """Tokens and time used since ``before`` (a tool's own LLM and retrieval calls)."""
        c = self.counts
        return {
            "prompt_tokens": c.prompt_tokens - before.prompt_tokens,
            "completion_tokens": c.completion_tokens - before.completion_tokens,
            "llm_calls": c.llm_calls - before.llm_calls,
            "llm_s": round(c.llm_s - before.llm_s, 4),
            "retrieval_s": round(c.retrieval_s - before.retrieval_s, 4),
        }

    def usage(self) -> dict[str, int]:
        """The question's ``Prediction.usage`` (``UsageRecord.to_dict``)."""
        c = self.counts
        return UsageRecord(
            prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens,
            llm_calls=c.llm_calls,
            llm_s=c.llm_s,
            cached_tokens=c.calls.cached_tokens,
            evaluated_tokens=c.calls.evaluated_tokens,
            prompt_s=c.calls.prompt_s,
            decode_s=c.calls.decode_s,
            tool_calls=self.tool_calls,
            retrieval_calls=c.retrieval_calls,
            retrieval_s=c.retrieval_s,
            by_tag=c.calls.by_tag,
        ).to_dict()

    # ------------------------------------------------------------------------------ context budget
    def tokens(self, messages: list[dict[str, Any]], with_tools: bool = True) -> int:
        """Estimated tokens of ``messages`` (and the tool schemas), at the calibrated rate."""
        chars = sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)
        if with_tools:
            chars += len(json.dumps(self.schemas))
        return math.ceil(chars * self.tpc)

    def calibrate(self, sent: list[dict[str, Any]], resp: ChatResponse) -> None:
        if resp.usage.prompt_tokens > 0:
            chars = sum(len(json.dumps(m, ensure_ascii=False)) for m in sent) + len(json.dumps(self.schemas))
            self.tpc = resp.usage.prompt_tokens / max(chars, 1)
