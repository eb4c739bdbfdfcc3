"""The structured model call: schemas from output models equal the hand-written ones they replace, one
extractor, one malformed-output retry policy, the prompt tag kept off the wire."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from medagent.agent.answers import answer_schema
from medagent.agent.tools import SPECS
from medagent.agent.tools.base import Tool, ToolContext, ToolResult
from medagent.agent.tools.compare import CompareReply
from medagent.agent.tools.locate import LocateReply
from medagent.agent.tools.options import OptionsReply
from medagent.agent.tools.relevance import RelevanceReply
from medagent.llm.base import CompletionChatModel, LLMError
from medagent.llm.structured import MalformedReply, Output, ask, extract_json, json_schema, parse
from tests.fakes import ScriptedChatModel, completion

STR: dict[str, Any] = {"type": "string"}


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def arr(items: dict[str, Any], max_items: int | None = None) -> dict[str, Any]:
    return {"type": "array", "items": items, **({"maxItems": max_items} if max_items else {})}


# The schemas as they were written by hand before the output models (the model must see the same).
OLD_TOOL_OUTPUTS = {
    CompareReply: obj(comparison=arr(obj(option=STR, supporting=STR, against=STR, verdict=STR))),
    LocateReply: obj(evidence=arr(obj(id=STR, quote=STR))),
    OptionsReply: obj(options=arr(STR)),
    RelevanceReply: obj(judgements=arr(obj(id=STR, relevant={"type": "boolean"}, reason=STR))),
}
OLD_TOOL_ARGS = {
    "final_answer": (
        {"answer": {**STR, "maxLength": 300, "description": "option letter, or a short answer"}},
        ["answer"],
    ),
    "perform_comparison": (
        {
            "question": {**STR, "maxLength": 4000},
            "options": {"type": "object", "description": "letter -> option"},
        },
        ["question"],
    ),
    "generate_options": ({"question": {**STR, "maxLength": 4000}}, ["question"]),
    "enable_search": (
        {"query": {**STR, "maxLength": 300, "description": "a focused search query"}},
        ["query"],
    ),
    "locate_evidence": (
        {
            "doc_ids": {
                "type": "array",
                "items": {**STR, "maxLength": 8},
                "maxItems": 8,
                "description": 'e.g. ["D1", "D3"]',
            }
        },
        ["doc_ids"],
    ),
    "relevance_analysis": ({}, []),
}


@pytest.mark.parametrize("model", list(OLD_TOOL_OUTPUTS), ids=lambda m: m.__name__)
def test_tool_output_schemas_equal_the_hand_written_ones(model: type[BaseModel]) -> None:
    new = json_schema(model)
    assert new == OLD_TOOL_OUTPUTS[model]
    assert json.dumps(new) == json.dumps(OLD_TOOL_OUTPUTS[model])  # key order too: the prompt reads the same


@pytest.mark.parametrize("name", list(OLD_TOOL_ARGS))
def test_tool_argument_schemas_equal_the_hand_written_ones(name: str) -> None:
    params, required = OLD_TOOL_ARGS[name]
    assert SPECS[name]["parameters"] == params and SPECS[name]["required"] == required
    assert json.dumps(SPECS[name]["parameters"]) == json.dumps(params)


def test_answer_schema_is_unchanged() -> None:
    assert answer_schema(["A", "B"]) == {
        "type": "json_schema",
        "json_schema": {
            "name": "answer",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {"answer": {"type": "string", "enum": ["A", "B"]}},
                "required": ["answer"],
                "additionalProperties": False,
            },
        },
    }


def test_a_tool_without_an_args_model_fails_when_defined() -> None:
    with pytest.raises(TypeError, match="args"):

        class Broken(Tool):
            name = "broken"
            description = "no args model"

            async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
                raise NotImplementedError


def test_one_extractor_reads_fences_bare_objects_and_lists() -> None:
    assert extract_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert extract_json('Sure: {"a": 1} and {"b": 2}') == {"a": 1}
    assert extract_json("[1, 2]") == [1, 2]
    assert extract_json('{broken {"a": 2}') == {"a": 2}
    assert extract_json("no json") is None


class _Q(Output):
    question: str


def test_parse_raises_malformed_reply_naming_the_field() -> None:
    assert parse(_Q, '{"question": "Any fever?"}').question == "Any fever?"
    with pytest.raises(MalformedReply, match="question"):
        parse(_Q, '{"q": 1}')
    with pytest.raises(MalformedReply, match="no JSON object"):
        parse(_Q, "hello")


class _Wire(CompletionChatModel):
    def __init__(self, replies: list[dict[str, Any] | Exception]) -> None:
        self.model = "m"
        self.replies = replies
        self.bodies: list[dict[str, Any]] = []

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        item = self.replies.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


def test_ask_tags_the_request_but_never_sends_the_tag() -> None:
    wire = _Wire([completion('{"question": "Any fever?"}')])
    reply = asyncio.run(ask(wire, [{"role": "user", "content": "hi"}], _Q, prompt="history_question"))
    assert reply.value is not None and reply.value.question == "Any fever?"
    assert "prompt" not in wire.bodies[0]
    assert wire.bodies[0]["response_format"]["json_schema"]["name"] == "history_question"
    fake = ScriptedChatModel([completion('{"question": "x"}')])
    asyncio.run(ask(fake, [{"role": "user", "content": "hi"}], _Q, prompt="history_question"))
    assert fake.requests[0]["prompt"] == "history_question"


def test_ask_retries_malformed_output_with_the_error_shown_then_gives_none() -> None:
    wire = _Wire([completion("no json"), completion('{"nope": 1}')])
    reply = asyncio.run(
        ask(wire, [{"role": "user", "content": "hi"}], _Q, prompt="p", max_retries=1, tag="t")
    )
    assert reply.value is None and len(reply.responses) == 2
    assert reply.errors[0].startswith("t: malformed reply (attempt 1): no JSON object")
    assert "no usable reply after 2 attempts" in reply.errors[-1]
    assert len(wire.bodies[1]["messages"]) > 1  # the retry prompt carries the error


def test_ask_lets_endpoint_failures_and_bugs_propagate() -> None:
    with pytest.raises(LLMError):
        asyncio.run(ask(_Wire([LLMError("down")]), [], _Q, prompt="p", max_retries=3))
    with pytest.raises(KeyError):
        asyncio.run(ask(_Wire([KeyError("bug")]), [], _Q, prompt="p", max_retries=3))


def test_annotator_schema_equals_the_hand_written_one() -> None:
    from medagent.interview.annotate.llm import extraction_schema
    from medagent.interview.types import INQUIRY_CATEGORIES

    names = {"type": "array", "items": {"type": "string", "enum": ["cough", "fever"]}, "maxItems": 5}
    categories = {"type": "string", "enum": list(INQUIRY_CATEGORIES)}
    old = {
        "type": "object",
        "properties": {
            "positive_findings": names,
            "negative_findings": names,
            "diagnoses": {"type": "array", "items": {"type": "string", "maxLength": 80}, "maxItems": 3},
            "question_categories": {
                "type": "object",
                "properties": {"2": categories, "4": categories},
                "required": ["2", "4"],
                "additionalProperties": False,
            },
        },
        "required": ["positive_findings", "negative_findings", "diagnoses", "question_categories"],
        "additionalProperties": False,
    }
    new = extraction_schema(["cough", "fever"], [2, 4], 5, 3)
    assert new == {
        "type": "json_schema",
        "json_schema": {"name": "interview_annotation", "strict": True, "schema": old},
    }
