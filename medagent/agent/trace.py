"""What traces keep of long values (``preview``), of one model call (``call_fields``), and the running usage
counts of one question (``Counts``).

The steps and their records are ``medagent.agent.episode``; usage totals are integers there (milliseconds for
time) so they fit ``Prediction.usage``.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from medagent.llm.base import ChatResponse
from medagent.llm.usage import UsageRecord

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


def call_fields(resp: ChatResponse) -> dict[str, Any]:
    """One model call's trace fields: the prompt it was rendered from, tokens sent / cached / evaluated /
    decoded and the engine's prompt and decode time (the last four only where the backend reports them)."""
    u = resp.usage
    out: dict[str, Any] = {"prompt": resp.prompt} if resp.prompt else {}
    out.update(latency_s=round(resp.latency_s, 4), prompt_tokens=u.prompt_tokens)
    if u.cached_tokens is not None:
        out["cached_tokens"] = u.cached_tokens
    if u.evaluated_tokens is not None:
        out["evaluated_tokens"] = u.evaluated_tokens
    out["completion_tokens"] = u.completion_tokens
    if u.prompt_ms is not None:
        out["prompt_ms"] = round(u.prompt_ms, 1)
    if u.decode_ms is not None:
        out["decode_ms"] = round(u.decode_ms, 1)
    out["finish_reason"] = resp.finish_reason
    return out


@dataclass
class Counts:
    """Running totals; ``Episode.delta`` subtracts two snapshots to attribute usage to one step.

    ``calls`` has every model call's figures by the prompt it was rendered from (``UsageRecord.by_tag``).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    llm_s: float = 0.0
    retrieval_calls: int = 0
    retrieval_s: float = 0.0
    calls: UsageRecord = field(default_factory=lambda: UsageRecord.calls(by_tag=True))

    def add(self, resp: ChatResponse) -> dict[str, Any]:
        """Counts one model call; returns its trace fields."""
        self.prompt_tokens += resp.usage.prompt_tokens
        self.completion_tokens += resp.usage.completion_tokens
        self.llm_calls += 1
        self.llm_s += resp.latency_s
        self.calls.add(resp.usage, resp.latency_s, resp.prompt or "other")
        return call_fields(resp)

    def copy(self) -> Counts:
        return copy.deepcopy(self)
