"""Reading tool calls out of a model reply, whichever way the model wrote them.

Backends with a tool-call parser return native ``tool_calls``; small models served without one (the
CPU Qwen2.5-Coder via llama.cpp) write the call as JSON in the text, usually in a ```json fence,
sometimes as a Hermes ``<tool_call>`` block or a bare object, and sometimes followed by an answer. This
module turns all of these into ``Call`` objects plus the remaining text, and says when the reply *looked*
like a call but could not be read, so the agent can tell the model what was wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from medagent.llm.base import ChatResponse
from medagent.llm.structured import decode_json

_FENCE = re.compile(r"```[ \t]*([A-Za-z_]*)[ \t]*\n?(.*?)```", re.S)
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
# Text that announces a call: a JSON "name"/"tool"/"function" key, or a fence or Hermes tag.
_CALL_HINT = re.compile(r'"(?:name|tool|tool_name|function|action)"\s*:|<tool_call>|```\s*json', re.I)
# Keys under which models put the arguments, in order of preference.
_ARG_KEYS = ("arguments", "args", "parameters", "params", "tool_input", "input", "action_input")
_NAME_KEYS = ("name", "tool", "tool_name", "function", "action")
_ANSWER_KEYS = ("final_answer", "answer")


@dataclass(frozen=True)
class Call:
    """One requested tool call; ``error`` is set when its arguments could not be read."""

    name: str
    arguments: dict[str, Any]
    id: str
    origin: str  # "native" or "text"
    error: str | None = None


@dataclass(frozen=True)
class ParsedReply:
    """A reply split into calls and the text around them.

    Attributes:
        calls: Calls in the order written.
        text: The reply with text-embedded calls removed (reasoning, or an answer).
        malformed: Why a reply that looked like a call could not be read; None otherwise.
    """

    calls: list[Call] = field(default_factory=list)
    text: str = ""
    malformed: str | None = None


def parse_reply(resp: ChatResponse, id_prefix: str, answer_tool: str = "final_answer") -> ParsedReply:
    """Native calls first; otherwise calls embedded in the text (fenced, Hermes-tagged or bare JSON).

    Args:
        resp: The model's turn.
        id_prefix: Prefix for ids given to calls that came without one (unique per step).
        answer_tool: Name a bare ``{"answer": ...}`` object is read as.
    """
    if resp.tool_calls:
        calls = []
        for i, tc in enumerate(resp.tool_calls):
            args = dict(tc.arguments)
            error = None
            if "__malformed__" in args:
                error = f"the arguments are not valid JSON: {str(args.pop('__malformed__'))[:200]!r}"
            calls.append(Call(tc.name, args, tc.id or f"{id_prefix}_{i}", "native", error))
        return ParsedReply(calls, resp.content.strip())
    return _parse_text(resp.content, id_prefix, answer_tool)


def _parse_text(text: str, id_prefix: str, answer_tool: str) -> ParsedReply:
    spans: list[tuple[int, int, Any]] = []  # (start, end, decoded JSON) of every call-bearing block
    errors: list[str] = []
    blocks = [(m.start(), m.end(), m.group(2)) for m in _FENCE.finditer(text)]
    blocks += [(m.start(), m.end(), m.group(1)) for m in _HERMES.finditer(text)]
    for start, end, body in blocks:
        if any(s <= start < e for s, e, _ in spans):
            continue  # a Hermes tag inside a fence
        value, err = decode_json(body)
        if err is None:
            spans.append((start, end, value))
        elif _CALL_HINT.search(body) or "{" in body:
            errors.append(err)
    if not spans and not errors:
        # No block: the first bare JSON object that reads as a call.
        decoder = json.JSONDecoder()
        pos = text.find("{")
        while pos != -1:
            try:
                value, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                if _CALL_HINT.search(text[pos : pos + 200]):
                    errors.append(f"invalid JSON: {exc.msg} at character {exc.pos - pos}")
                    break
                pos = text.find("{", pos + 1)
                continue
            if _to_calls(value, "x", answer_tool):
                spans.append((pos, end, value))
                break
            pos = text.find("{", end)
    calls: list[Call] = []
    for _start, _end, value in sorted(spans, key=lambda s: s[0]):
        found = _to_calls(value, f"{id_prefix}_{len(calls)}", answer_tool)
        if not found:
            errors.append(
                f"the JSON object {json.dumps(value)[:120]} is not a tool call; "
                'write {"name": "<tool>", "arguments": {...}}'
            )
        calls.extend(found)
    rest = text
    for start, end, _ in sorted(spans, key=lambda s: -s[0]):
        rest = rest[:start] + rest[end:]
    malformed = None if calls else ("; ".join(errors) or None)
    return ParsedReply(calls, rest.strip(), malformed)


def _to_calls(value: Any, call_id: str, answer_tool: str) -> list[Call]:
    """Every accepted shape -> calls; [] when ``value`` is not a call."""
    if isinstance(value, list):
        out: list[Call] = []
        for i, item in enumerate(value):
            out.extend(_to_calls(item, f"{call_id}_{i}", answer_tool))
        return out
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("tool_calls"), list):
        return _to_calls(value["tool_calls"], call_id, answer_tool)
    if isinstance(value.get("function"), dict):  # OpenAI shape: {"type": "function", "function": {...}}
        return _to_calls(value["function"], call_id, answer_tool)
    name = next((value[k] for k in _NAME_KEYS if isinstance(value.get(k), str) and value[k]), None)
    if name is None:
        # {"answer": "B"}: an answer written as JSON, read as the answer tool.
        for key in _ANSWER_KEYS:
            if key in value and len(value) <= 2:
                return [Call(answer_tool, {"answer": value[key]}, call_id, "text")]
        return []
    raw_args = next((value[k] for k in _ARG_KEYS if k in value), None)
    error = None
    if raw_args is None:
        # Arguments written inline next to the name: {"name": "enable_search", "query": "..."}.
        args = {k: v for k, v in value.items() if k not in (*_NAME_KEYS, "type", "id")}
    elif isinstance(raw_args, str):
        try:
            decoded = json.loads(raw_args) if raw_args.strip() else {}
        except json.JSONDecodeError:
            decoded, error = {}, f"the arguments are not valid JSON: {raw_args[:200]!r}"
        args = decoded if isinstance(decoded, dict) else {}
        if not isinstance(decoded, dict) and error is None:
            error = "the arguments must be a JSON object"
    elif isinstance(raw_args, dict):
        args = raw_args
    else:
        args, error = {}, "the arguments must be a JSON object"
    return [Call(name, args, call_id, "text", error)]
