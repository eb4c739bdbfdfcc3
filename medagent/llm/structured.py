"""One structured model call: a prompt names a pydantic output model, and this module does the rest.

From the output model it builds the strict JSON schema the model is constrained by (``response_format``),
reads the JSON value out of the reply text (one extractor for every caller), validates it with
``model_validate``, and retries the model's malformed output by one policy: the validation error is shown
to the model (the ``history_retry`` prompt) and the request sent again, up to ``max_retries`` times; after
that the caller gets ``None`` and the errors, and handles it. Endpoint failures are the client's business
(``medagent.llm.retry``): an ``LLMError`` propagates, and so does any other exception, which is a bug.

Each request is tagged with the prompt's name (``ChatModel.chat(prompt=...)``), which the clients keep
out of the request body: test fakes route on it, and usage is counted per prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from medagent.llm.base import ChatModel, ChatResponse
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

RETRY_PROMPT = "history_retry"
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


class MalformedReply(ValueError):
    """The model's reply is not usable: no JSON value, or a value of the wrong shape."""


class Output(BaseModel):
    """Base of the output models: unknown keys are ignored when reading (a small model adds some), while
    the schema the model sees forbids them (``json_schema``)."""

    model_config = ConfigDict(extra="ignore")


def _as_text(value: Any) -> Any:
    return value if isinstance(value, str) else str(value)


# A string field that also reads a number or another scalar a small model wrote there, as its text.
Text = Annotated[str, BeforeValidator(_as_text)]


def capped_str(max_length: int) -> Any:
    """A string the schema caps at ``max_length`` characters while reading accepts any length: the cap
    shapes constrained decoding, and a backend without JSON schemas is not failed for a long reply."""
    return Annotated[str, Field(json_schema_extra={"maxLength": max_length})]


def capped_text(max_length: int) -> Any:
    """``Text`` (a number or other scalar read as its text) that the schema caps at ``max_length`` characters."""
    return Annotated[str, BeforeValidator(_as_text), Field(json_schema_extra={"maxLength": max_length})]


def one_line(value: str, name: str) -> str:
    """A reply field's text on one line (runs of whitespace made one space); raises when nothing is left
    (a validator's ``ValueError``: the reply is malformed and retried)."""
    text = " ".join(value.split())
    if len(text) < 3:
        raise ValueError(f"'{name}' is empty")
    return text


def capped_list(item: Any, max_items: int) -> Any:
    """A list the schema caps at ``max_items`` items while reading accepts any number (as ``capped_str``)."""
    return Annotated[list[item], Field(json_schema_extra={"maxItems": max_items})]  # type: ignore[valid-type]


def enum_str(values: Sequence[str], max_length: int | None = None) -> Any:
    """A string the schema restricts to ``values`` while validation accepts any string: the caller maps or
    drops a value outside the set itself (and records it), as a constrained backend never sends one."""
    extra: dict[str, Any] = {"enum": list(values)}
    return Annotated[str, Field(max_length=max_length, json_schema_extra=extra)]


# --- schema -------------------------------------------------------------------------------------------


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The strict JSON schema of ``model``: references inlined, every property required, no other keys.

    Titles, defaults and descriptions pydantic adds for documentation are dropped, so the schema is the
    same one the model saw when schemas were written by hand (``tests/unit/test_structured.py``).
    """
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})
    raw.pop("description", None)  # the docstring
    return _strict(raw, defs)


# Keys in the order hand-written schemas had them, so a schema rendered into a prompt reads the same.
_KEY_ORDER = ("type", "const", "enum", "properties", "items", "maxLength", "maxItems", "required")


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    first = [k for k in _KEY_ORDER if k in node]
    return {k: node[k] for k in [*first, *(k for k in node if k not in first)]}


def _strict(node: Any, defs: dict[str, Any]) -> Any:
    """One schema node made strict (lists of schemas, as in ``anyOf``, node by node)."""
    if isinstance(node, list):
        return [_strict(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:  # a model's docstring is for readers of the code, the field's description stays
        target = {k: v for k, v in defs[node["$ref"].rsplit("/", 1)[-1]].items() if k != "description"}
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "default"):
            continue
        if key in ("properties", "$defs"):  # a mapping of names to schemas, not a schema
            out[key] = {k: _strict(v, defs) for k, v in value.items()}
        else:
            out[key] = _strict(value, defs)
    if out.get("type") == "object" and "properties" in out:
        out["required"] = list(out["properties"])
        out.setdefault("additionalProperties", False)
    return _ordered(out)


def response_format(name: str, model: type[BaseModel]) -> dict[str, Any]:
    """An OpenAI ``response_format`` constraining the reply to ``model``'s strict schema."""
    return {
        "type": "json_schema",
        "json_schema": {"name": name, "strict": True, "schema": json_schema(model)},
    }


def args_schema(model: type[BaseModel]) -> tuple[dict[str, Any], list[str]]:
    """A tool's argument ``properties`` and ``required`` names (fields without a default) from its model."""
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})
    props = {k: _strict(v, defs) for k, v in raw.get("properties", {}).items()}
    return props, list(raw.get("required", []))


# --- reading ------------------------------------------------------------------------------------------


def decode_json(body: str) -> tuple[Any, str | None]:
    """The JSON value of ``body`` (or the first object after leading text), else ``(None, error)``."""
    body = body.strip()
    try:
        return json.loads(body), None
    except json.JSONDecodeError as exc:
        first = body.find("{")
        if first > 0:
            try:
                return json.JSONDecoder().raw_decode(body, first)[0], None
            except json.JSONDecodeError:
                pass
        return None, f"invalid JSON: {exc.msg} at character {exc.pos}"


def first_object(text: str) -> dict[str, Any] | None:
    """The first JSON object embedded anywhere in ``text``, or None."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def extract_json(text: str) -> Any:
    """The JSON value of a reply: a ```json fence's body or the whole text, else the first object in it.

    Returns None when the text holds no JSON value.
    """
    fence = _FENCE.search(text)
    value, err = decode_json(fence.group(1) if fence else text)
    if err is None:
        return value
    return first_object(text)


def json_object(text: str) -> dict[str, Any]:
    """The JSON object of a reply (``extract_json``), for a caller that reads it field by field.

    Raises:
        MalformedReply: The reply holds no JSON object.
    """
    value = extract_json(text)
    if not isinstance(value, dict):
        raise MalformedReply(f"no JSON object in the reply: {text[:120]!r}")
    return value


def parse(model: type[M], text: str) -> M:
    """The reply validated as ``model``.

    Raises:
        MalformedReply: No JSON value in ``text``, or one ``model`` rejects (the message says why).
    """
    value = extract_json(text)
    if value is None:
        raise MalformedReply(f"no JSON object in the reply: {text[:120]!r}")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise MalformedReply(_explain(exc)) from exc


def _explain(exc: ValidationError) -> str:
    """A validation error in a line a model can act on (the custom message when a validator gave one)."""
    errors = exc.errors()
    missing = [".".join(str(p) for p in e["loc"]) for e in errors if e["type"] == "missing"]
    parts = [f"keys missing: {missing}"] if missing else []
    for e in [e for e in errors if e["type"] != "missing"][:3]:
        where = ".".join(str(p) for p in e["loc"])
        msg = str(e["msg"]).removeprefix("Value error, ")
        parts.append(f"{where!r}: {msg}" if where and e["type"] != "value_error" else msg)
    return "; ".join(parts)


# --- the call -----------------------------------------------------------------------------------------


@dataclass
class Reply(Generic[T]):
    """A structured call's outcome: the value (None when every attempt was malformed), the responses in
    order and the malformed-output errors met, each naming the call (``tag``) and attempt."""

    value: T | None
    responses: list[ChatResponse] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def ask(
    llm: ChatModel,
    messages: list[dict[str, Any]],
    output: type[M],
    *,
    prompt: str,
    schema_name: str | None = None,
    json_schema_ok: bool = True,
    **options: Any,
) -> Reply[M]:
    """Sends ``messages`` constrained to ``output``; validates the reply; retries malformed output.

    Args:
        llm: The chat model.
        messages: The rendered prompt.
        output: The prompt's output model.
        prompt: The prompt's name, carried with the request (never sent to the endpoint).
        schema_name: The ``response_format`` name (defaults to ``prompt``).
        json_schema_ok: Whether the backend honours ``response_format`` JSON schemas (else none is sent and
            the prompt's own instructions carry the shape).
        **options: As ``ask_with``'s.

    Raises:
        LLMError: The endpoint failed (after the client's own retries).
    """
    fmt = response_format(schema_name or prompt, output) if json_schema_ok else None
    return await ask_with(llm, messages, lambda text: parse(output, text), prompt=prompt, fmt=fmt, **options)


async def ask_with(
    llm: ChatModel,
    messages: list[dict[str, Any]],
    read: Callable[[str], T],
    *,
    prompt: str,
    fmt: dict[str, Any] | None,
    max_tokens: int = 512,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_retries: int = 0,
    tag: str | None = None,
    retry_prompt: str = RETRY_PROMPT,
    cut_hint: str = "",
    on_response: Callable[[ChatResponse], object] | None = None,
    usage: UsageRecord | None = None,
) -> Reply[T]:
    """The one malformed-output retry loop: ``read`` turns the reply text into a value or raises
    ``MalformedReply``, which is recorded, shown to the model and retried.

    Args:
        read: Reply text -> value (``parse`` with an output model, in ``ask``).
        fmt: The ``response_format`` sent, if any.
        max_retries: Further attempts after a malformed reply, each with the error shown to the model.
        tag: How errors name this call (defaults to ``prompt``).
        cut_hint: Added to the error of a reply cut at ``max_tokens``.
        on_response: Called with every response, malformed or not.
        usage: Counts every response under ``tag`` and gets the errors met.
    """
    tag = tag or prompt
    retry = load_prompt(retry_prompt) if max_retries else None
    reply: Reply[T] = Reply(None)
    attempt_messages = messages
    for attempt in range(max_retries + 1):
        resp = await llm.chat(
            attempt_messages,
            response_format=fmt,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            prompt=prompt,
        )
        reply.responses.append(resp)
        if usage is not None:
            usage.add(resp.usage, resp.latency_s, tag)
        if on_response is not None:
            on_response(resp)
        try:
            reply.value = read(resp.content)
            if usage is not None:
                usage.errors.extend(reply.errors)
            return reply
        except MalformedReply as exc:
            problem = str(exc)
            if resp.finish_reason == "length":
                problem += f" (reply cut at max_tokens={max_tokens}{cut_hint})"
            reply.errors.append(f"{tag}: malformed reply (attempt {attempt + 1}): {problem}")
            if retry is not None:
                # The error (which quotes the reply's start) is the observation; the full reply is not echoed
                # back, so a retry costs a few dozen tokens of context, not another max_tokens.
                attempt_messages = [*messages, *retry.render(error=problem)]
    reply.errors.append(f"{tag}: no usable reply after {max_retries + 1} attempts")
    if usage is not None:
        usage.errors.extend(reply.errors)
    return reply
