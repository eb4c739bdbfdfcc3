"""Constrained agent turns (``llm.tool_calls=json_schema``): one call per turn, chosen by the model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from medagent.agent import build_agent
from medagent.agent.services import AgentDeps
from medagent.agent.tools import call_schema
from tests.configs import agent_config
from tests.unit._qa_fakes import AgentModel, FakeReranker, FakeRetriever, Q, make_docs, reply


def turn(name: str, arguments: dict[str, Any], thought: str = "") -> dict[str, Any]:
    return reply(json.dumps({"thought": thought, "name": name, "arguments": arguments}))


def test_call_schema_offers_each_tool_once_and_the_option_letters() -> None:
    fmt = call_schema(["perform_comparison", "enable_search", "final_answer"], ["A", "B", "C"])
    variants = fmt["json_schema"]["schema"]["anyOf"]
    assert [v["properties"]["name"]["const"] for v in variants] == [
        "perform_comparison", "enable_search", "final_answer"]  # fmt: skip
    # The question-bound tools take no arguments (the tool reads the question itself).
    assert variants[0]["properties"]["arguments"]["properties"] == {}
    assert variants[1]["properties"]["arguments"]["required"] == ["query"]
    assert variants[2]["properties"]["arguments"]["properties"]["answer"]["enum"] == ["A", "B", "C"]
    assert all(v["required"] == ["thought", "name", "arguments"] for v in variants)


def test_the_full_agent_runs_on_constrained_turns() -> None:
    model = AgentModel([
        turn("perform_comparison", {}, "compare first"),
        turn("enable_search", {"query": "P2Y12 inhibitor"}),
        turn("relevance_analysis", {}),
        turn("locate_evidence", {"doc_ids": ["D1"]}),
        turn("final_answer", {"answer": "B"}),
    ])  # fmt: skip
    cfg = agent_config(mode="full", top_k=4, top_r=4, batch_size=4)
    services = AgentDeps(
        retriever=FakeRetriever(make_docs(4)),
        reranker=FakeReranker(),
        json_schema=True,
        tool_calls="json_schema",
    )
    pred = asyncio.run(build_agent(cfg, model, services).answer(Q))
    assert pred.answer == "B" and pred.evidence
    turns = model.of_kind("turn")
    assert len(turns) == 5
    assert all("tools" not in b and b["response_format"]["json_schema"]["name"] == "tool_call" for b in turns)
    names = [
        v["properties"]["name"]["const"]
        for v in turns[0]["response_format"]["json_schema"]["schema"]["anyOf"]
    ]
    assert names == [
        "perform_comparison",
        "enable_search",
        "relevance_analysis",
        "locate_evidence",
        "final_answer",
    ]
    tools = [s["tool"] for s in pred.trace if s["kind"] == "tool" and s["tool"] != "final_answer"]
    assert tools == ["perform_comparison", "enable_search", "relevance_analysis", "locate_evidence"]


def test_the_thought_budget_comes_from_the_config() -> None:
    from dataclasses import replace

    cfg = agent_config(mode="no_search")
    cfg = replace(cfg, loop=replace(cfg.loop, thought_chars=120))
    model = AgentModel([turn("final_answer", {"answer": "B"}, "short")])
    services = AgentDeps(json_schema=True, tool_calls="json_schema")
    assert asyncio.run(build_agent(cfg, model, services).answer(Q)).answer == "B"
    variants = model.of_kind("turn")[0]["response_format"]["json_schema"]["schema"]["anyOf"]
    assert {v["properties"]["thought"]["maxLength"] for v in variants} == {120}
    default = call_schema(["final_answer"])["json_schema"]["schema"]["anyOf"][0]
    assert default["properties"]["thought"]["maxLength"] == 300


def test_without_json_schema_support_turns_stay_free() -> None:
    model = AgentModel([turn("final_answer", {"answer": "B"})])
    services = AgentDeps(json_schema=False, tool_calls="json_schema")
    pred = asyncio.run(build_agent(agent_config(mode="no_search"), model, services).answer(Q))
    assert pred.answer == "B"
    assert "tools" in model.of_kind("turn")[0] and "response_format" not in model.of_kind("turn")[0]


def test_a_repeated_call_or_a_second_quote_of_the_same_document_is_refused_without_work() -> None:
    model = AgentModel([
        turn("enable_search", {"query": "P2Y12"}),
        turn("enable_search", {"query": "P2Y12"}),  # identical: not run again
        turn("relevance_analysis", {}),
        turn("locate_evidence", {"doc_ids": ["D1"]}),
        turn("locate_evidence", {"doc_ids": ["D1", "D1"]}),  # D1 is already quoted: no LLM call
        turn("final_answer", {"answer": "B"}),
    ])  # fmt: skip
    retriever = FakeRetriever(make_docs(4))
    services = AgentDeps(
        retriever=retriever, reranker=FakeReranker(), json_schema=True, tool_calls="json_schema"
    )
    pred = asyncio.run(build_agent(agent_config(mode="full", top_k=4, top_r=4), model, services).answer(Q))
    assert len(retriever.calls) == 1 and len(model.of_kind("locate")) == 1
    steps = [s for s in pred.trace if s["kind"] == "tool"]
    assert "Not run: the same enable_search call" in model.of_kind("turn")[2]["messages"][-1]["content"]
    assert [s["ok"] for s in steps if s["tool"] == "locate_evidence"] == [True, False]
    assert pred.answer == "B"
