"""One usage record for every agent: what the model (and retrieval) calls of one question or interview cost.

The QA agents keep it in ``Prediction.usage``, the history-taking agent in its result's ``usage`` and an
interview row's ``simulator_usage`` / ``eval_usage``, all as ``UsageRecord.to_dict()``. A figure an agent
does not count is ``None`` and left out of the dict, so a reader can tell "not counted" from zero (the
report counts LLM calls from the trace when ``llm_calls`` is absent). ``from_dict`` also reads the keys
the history-taking agent wrote before the record was shared (``calls``, ``latency_s``, ``by_tag`` entries
in seconds), so old run directories still report.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from medagent.llm.base import ChatResponse, Usage

# Serialised key -> attribute, in the order the dict is written: the demo prints it as it is. Times are
# kept in seconds and written as whole milliseconds.
_ATTRS = {
    "prompt_tokens": "prompt_tokens",
    "cached_tokens": "cached_tokens",
    "evaluated_tokens": "evaluated_tokens",
    "completion_tokens": "completion_tokens",
    "llm_calls": "llm_calls",
    "llm_ms": "llm_s",
    "prompt_ms": "prompt_s",
    "decode_ms": "decode_s",
    "tool_calls": "tool_calls",
    "retrieval_calls": "retrieval_calls",
    "retrieval_ms": "retrieval_s",
}
# Keys the history-taking agent wrote before the record was shared -> today's keys.
_OLD_KEYS = {"calls": "llm_calls"}


def call_kind(tag: str) -> str:
    """The kind of call a tag names: ``turn 3 question (onset)`` -> ``question``."""
    return re.sub(r" \(.*\)$", "", re.sub(r"^turn \d+ ", "", tag)) or "other"


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


@dataclass
class UsageRecord:
    """Calls, tokens and time; ``by_tag`` has the same figures per kind of call (``call_kind``).

    Attributes:
        prompt_tokens: Prompt tokens sent in every model call.
        cached_tokens: Of those, tokens the engine served from its prefix cache (None: no backend reported
            it; summed over the calls that did).
        evaluated_tokens: Prompt tokens the engine computed (None as ``cached_tokens``).
        completion_tokens: Tokens decoded in every model call.
        llm_calls: Model calls (malformed replies and their retries included).
        llm_s: Time spent in model calls (serialised as ``llm_ms``, whole milliseconds).
        prompt_s: Engine time reading prompts (``prompt_ms``; None: not reported).
        decode_s: Engine time decoding (``decode_ms``; None: not reported).
        tool_calls: Tool calls the QA agent made (None: the agent has no tools).
        retrieval_calls: Retrieval requests (None: not counted).
        retrieval_s: Time spent in retrieval (serialised as ``retrieval_ms``).
        by_tag: Kind of call ("question", "state update", "patient"...) -> its figures; where an interview's
            time goes is the first thing to read when a run is slow. None: not broken down.
        errors: What went wrong in those calls, for the caller's log; never serialised with the figures.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    llm_calls: int | None = None
    llm_s: float | None = None
    tool_calls: int | None = None
    retrieval_calls: int | None = None
    retrieval_s: float | None = None
    by_tag: dict[str, UsageRecord] | None = None
    errors: list[str] = field(default_factory=list, compare=False)
    cached_tokens: int | None = None
    evaluated_tokens: int | None = None
    prompt_s: float | None = None
    decode_s: float | None = None

    @classmethod
    def calls(cls, *, by_tag: bool = False) -> UsageRecord:
        """An empty record counting model calls (and, with ``by_tag``, the same per kind of call)."""
        return cls(
            prompt_tokens=0, completion_tokens=0, llm_calls=0, llm_s=0.0, by_tag={} if by_tag else None
        )

    @classmethod
    def of_responses(cls, responses: Iterable[ChatResponse], *, by_tag: bool = False) -> UsageRecord:
        """The record of some model calls (with ``by_tag``, broken down by the prompt each was rendered from)."""
        out = cls.calls(by_tag=by_tag)
        for r in responses:
            out.add(r.usage, r.latency_s, r.prompt or None)
        return out

    @property
    def hit_rate(self) -> float | None:
        """Share of the prompt tokens sent that the engine's prefix cache served (None: not reported)."""
        if self.cached_tokens is None or not self.prompt_tokens:
            return None
        return self.cached_tokens / self.prompt_tokens

    def add(self, usage: Usage, latency_s: float, tag: str | None = None) -> None:
        """Counts one model call (under ``call_kind(tag)`` too when the record is broken down)."""
        self.prompt_tokens = (self.prompt_tokens or 0) + usage.prompt_tokens
        self.completion_tokens = (self.completion_tokens or 0) + usage.completion_tokens
        self.llm_calls = (self.llm_calls or 0) + 1
        self.llm_s = (self.llm_s or 0.0) + latency_s
        # A figure the backend did not report for this call leaves the record's as it is (None stays None).
        if usage.cached_tokens is not None:
            self.cached_tokens = (self.cached_tokens or 0) + usage.cached_tokens
        if usage.evaluated_tokens is not None:
            self.evaluated_tokens = (self.evaluated_tokens or 0) + usage.evaluated_tokens
        if usage.prompt_ms is not None:
            self.prompt_s = (self.prompt_s or 0.0) + usage.prompt_ms / 1000
        if usage.decode_ms is not None:
            self.decode_s = (self.decode_s or 0.0) + usage.decode_ms / 1000
        if self.by_tag is not None:
            self.by_tag.setdefault(call_kind(tag or "other"), UsageRecord.calls()).add(usage, latency_s)

    def __add__(self, other: UsageRecord) -> UsageRecord:
        """Figures summed; a figure neither side counted stays uncounted."""

        def plus(a: Any, b: Any) -> Any:
            return None if a is None and b is None else (a or 0) + (b or 0)

        out = UsageRecord(**{k: plus(getattr(self, k), getattr(other, k)) for k in _ATTRS.values()})
        if self.by_tag is not None or other.by_tag is not None:
            mine, theirs = self.by_tag or {}, other.by_tag or {}
            out.by_tag = {
                k: mine.get(k, UsageRecord()) + theirs.get(k, UsageRecord())
                for k in dict.fromkeys([*mine, *theirs])
            }
        out.errors = [*self.errors, *other.errors]
        return out

    def to_dict(self) -> dict[str, Any]:
        """The counted figures (``_ATTRS`` order), then ``by_tag`` by kind name."""
        out: dict[str, Any] = {}
        for key, attr in _ATTRS.items():
            value = getattr(self, attr)
            if value is not None:
                out[key] = _ms(value) if attr != key else value
        if self.by_tag is not None:
            out["by_tag"] = {k: v.to_dict() for k, v in sorted(self.by_tag.items())}
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> UsageRecord:
        """Reads ``to_dict``'s keys and the older history keys (module docstring); other keys are ignored."""
        d = d or {}
        values: dict[str, Any] = {}
        for key, value in d.items():
            key = _OLD_KEYS.get(key, key)
            if key in _ATTRS and value is not None:
                attr = _ATTRS[key]
                values[attr] = float(value) / 1000 if attr != key else int(value)
        if "llm_s" not in values and d.get("latency_s") is not None:
            values["llm_s"] = float(d["latency_s"])
        tags = d.get("by_tag")
        by_tag = {str(k): cls.from_dict(v) for k, v in tags.items()} if isinstance(tags, dict) else None
        return cls(**values, by_tag=by_tag)
