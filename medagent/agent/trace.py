"""Per-question trace and usage bookkeeping shared by the tool-using agents.

One ``Recorder`` per ``answer()`` call: every LLM call and retrieval call is counted here, and every step
(model turn, tool call, observation, final answer) becomes one trace dict. Usage totals are integers
(milliseconds for time) so they fit ``Prediction.usage``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from medagent.llm.base import ChatResponse

# Longest string kept in a trace field: traces are for audit, not a copy of every document.
PREVIEW_CHARS = 300


def preview(value: Any, limit: int = PREVIEW_CHARS) -> Any:
    """Strings cut to ``limit``; containers cut recursively (arguments can hold whole option lists)."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "..."
    if isinstance(value, dict):
        return {str(k): preview(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [preview(v, limit) for v in value[:32]]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return preview(json.dumps(value, default=str), limit)


@dataclass
class Counts:
    """Running totals; ``Recorder.delta`` subtracts two snapshots to attribute usage to one step."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    llm_s: float = 0.0
    retrieval_calls: int = 0
    retrieval_s: float = 0.0

    def copy(self) -> Counts:
        return Counts(**vars(self))


@dataclass
class Recorder:
    """Trace steps and usage of one question."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    tool_calls: int = 0

    def llm(self, resp: ChatResponse) -> dict[str, Any]:
        """Counts one LLM call; returns its trace fields."""
        c = self.counts
        c.prompt_tokens += resp.usage.prompt_tokens
        c.completion_tokens += resp.usage.completion_tokens
        c.llm_calls += 1
        c.llm_s += resp.latency_s
        return {
            "latency_s": round(resp.latency_s, 4),
            "prompt_tokens": resp.usage.prompt_tokens,
            "completion_tokens": resp.usage.completion_tokens,
            "finish_reason": resp.finish_reason,
        }

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

    def step(self, kind: str, **fields: Any) -> dict[str, Any]:
        entry = {"step": len(self.steps), "kind": kind, **fields}
        self.steps.append(entry)
        return entry

    def usage(self) -> dict[str, int]:
        c = self.counts
        return {
            "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens,
            "llm_calls": c.llm_calls,
            "tool_calls": self.tool_calls,
            "retrieval_calls": c.retrieval_calls,
            "llm_ms": round(c.llm_s * 1000),
            "retrieval_ms": round(c.retrieval_s * 1000),
        }
