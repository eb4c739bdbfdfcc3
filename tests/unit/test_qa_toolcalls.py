"""Reading tool calls: native, fenced, Hermes-tagged, bare JSON, and the shapes small models write."""

import json

import pytest

from medagent.agent.toolargs import doc_handles
from medagent.agent.toolcalls import parse_reply
from medagent.llm.base import ChatResponse, ToolCall


def _text(content: str) -> ChatResponse:
    return ChatResponse(content=content)


def test_native_calls_keep_their_ids_and_flag_bad_json() -> None:
    resp = ChatResponse(
        content="Let me search.",
        tool_calls=(
            ToolCall("enable_search", {"query": "p2y12"}, id="c1"),
            ToolCall("locate_evidence", {"__malformed__": '{"doc_ids": [D1'}, id="c2"),
        ),
    )
    parsed = parse_reply(resp, "s0")
    assert [(c.name, c.id, c.origin) for c in parsed.calls] == [
        ("enable_search", "c1", "native"),
        ("locate_evidence", "c2", "native"),
    ]
    assert parsed.calls[0].error is None and "not valid JSON" in (parsed.calls[1].error or "")
    assert parsed.text == "Let me search."


@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"name": "enable_search", "arguments": {"query": "p2y12"}}\n```',
        '```\n{"name": "enable_search", "arguments": "{\\"query\\": \\"p2y12\\"}"}\n```',
        '<tool_call>\n{"name": "enable_search", "arguments": {"query": "p2y12"}}\n</tool_call>',
        'I will search. {"name": "enable_search", "arguments": {"query": "p2y12"}}',
        '{"tool": "enable_search", "args": {"query": "p2y12"}}',
        '{"name": "enable_search", "parameters": {"query": "p2y12"}}',
        '{"name": "enable_search", "query": "p2y12"}',
        '{"type": "function", "function": {"name": "enable_search", "arguments": {"query": "p2y12"}}}',
        '{"tool_calls": [{"function": {"name": "enable_search", "arguments": {"query": "p2y12"}}}]}',
    ],
)
def test_text_calls_in_every_accepted_shape(content: str) -> None:
    parsed = parse_reply(_text(content), "s1")
    assert len(parsed.calls) == 1, parsed
    call = parsed.calls[0]
    assert (call.name, call.arguments, call.origin, call.error) == (
        "enable_search",
        {"query": "p2y12"},
        "text",
        None,
    )
    assert call.id.startswith("s1_") and parsed.malformed is None


def test_call_and_answer_in_one_reply_are_split() -> None:
    content = '```json\n{"name": "enable_search", "arguments": {"query": "p2y12"}}\n```\nThe answer is B.'
    parsed = parse_reply(_text(content), "s2")
    assert [c.name for c in parsed.calls] == ["enable_search"]
    assert parsed.text == "The answer is B."


def test_json_answer_reads_as_the_answer_tool() -> None:
    parsed = parse_reply(_text('```json\n{"answer": "B"}\n```'), "s3")
    assert [(c.name, c.arguments) for c in parsed.calls] == [("final_answer", {"answer": "B"})]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('```json\n{"name": "enable_search", "arguments": {"query": }\n```', "invalid JSON"),
        ('{"name": "enable_search", "arguments": {"query": "p2y12"', "invalid JSON"),
        ('```json\n{"comparison": [1, 2]}\n```', "not a tool call"),
        ('```json\n{"name": "enable_search", "arguments": [1]}\n```', None),
    ],
)
def test_unreadable_calls_are_reported(content: str, why: str | None) -> None:
    parsed = parse_reply(_text(content), "s4")
    if why is None:  # readable as a call, but its arguments are wrong: the call carries the error
        assert parsed.calls[0].error == "the arguments must be a JSON object"
    else:
        assert parsed.calls == [] and why in (parsed.malformed or "")


def test_plain_text_is_neither_call_nor_malformed() -> None:
    parsed = parse_reply(_text("The answer is B because {it blocks P2Y12}."), "s5")
    assert parsed.calls == [] and parsed.malformed is None and parsed.text.startswith("The answer")


def test_several_fenced_calls_come_in_order() -> None:
    blocks = [json.dumps({"name": n, "arguments": {}}) for n in ("relevance_analysis", "perform_comparison")]
    parsed = parse_reply(_text("\n".join(f"```json\n{b}\n```" for b in blocks)), "s6")
    assert [c.name for c in parsed.calls] == ["relevance_analysis", "perform_comparison"]
    assert len({c.id for c in parsed.calls}) == 2


def test_document_handles_in_the_shapes_models_write() -> None:
    assert doc_handles(["D1", "d3", "D1"]) == ["D1", "D3"]
    assert doc_handles("D2, D4") == ["D2", "D4"]
    assert doc_handles([1, "doc5", "[D6]"]) == ["D1", "D5", "D6"]
    assert doc_handles(None) == [] and doc_handles({"a": 1}) == []
