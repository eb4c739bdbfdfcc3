"""Each tool on its own (medagent.agent.tools): registry, schema, and one run against a memory bank."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from medagent.agent.episode import Episode
from medagent.agent.memory import MemoryBank
from medagent.agent.toolargs import ToolError
from medagent.agent.tools import TOOLS, ToolContext, mode_tools, run_tool, searches, tool_names, tool_schemas
from medagent.types import Question
from tests.configs import agent_config
from tests.unit._qa_fakes import AgentModel, FakeReranker, FakeRetriever, Q, make_docs


def _ctx(memory_kind: str = "cache_prune", question: Question = Q, **cfg: Any) -> ToolContext:
    return ToolContext(
        question=question, memory=MemoryBank(question.id, batch_size=2, top_r=4), rec=Episode(),
        llm=AgentModel([]), cfg=agent_config(mode="full", **cfg), memory_kind=memory_kind,
        retriever=FakeRetriever(make_docs(4)), reranker=FakeReranker(),
    )  # fmt: skip


def run(ctx: ToolContext, name: str, **args: Any) -> Any:
    return asyncio.run(run_tool(name, ctx, args))


def test_registry_holds_the_papers_tools_with_their_rules() -> None:
    assert set(TOOLS) == {"perform_comparison", "generate_options", "enable_search", "relevance_analysis",
                          "locate_evidence", "final_answer"}  # fmt: skip
    assert TOOLS.get("relevance_analysis").repeatable and not TOOLS.get("enable_search").repeatable
    assert TOOLS.get("enable_search").searches and TOOLS.get("perform_comparison").question_default
    (schema,) = tool_schemas(["locate_evidence"])
    assert schema["function"]["parameters"]["required"] == ["doc_ids"]


def test_modes_are_config_with_defaults() -> None:
    assert mode_tools(agent_config(mode="no_cache_prune")) == (
        ["perform_comparison", "enable_search"],
        "context",
    )
    custom = agent_config(mode="full", tools=["perform_comparison"], memory="none")
    assert tool_names(custom, open_ended=True) == ["generate_options", "perform_comparison", "final_answer"]
    assert not searches(custom) and searches(agent_config(mode="full"))
    with pytest.raises(ValueError, match="unknown"):
        mode_tools(agent_config(mode="full", tools=["google"]))
    with pytest.raises(ValueError, match="memory"):
        mode_tools(agent_config(mode="full", memory="infinite"))


def test_perform_comparison_uses_the_real_options() -> None:
    ctx = _ctx()
    out = run(ctx, "perform_comparison", options={"Z": "invented"})
    assert out.content.startswith("Comparison:") and out.summary == {"rows": 1}
    assert "invented" not in str(ctx.llm.requests[0]["messages"])  # type: ignore[attr-defined]


def test_generate_options_keeps_candidates_in_memory() -> None:
    ctx = _ctx(question=Question(id="o", text="What drug?", options=None, benchmark="t"))
    out = run(ctx, "generate_options")
    assert ctx.memory.candidates == ["Clopidogrel", "Aspirin"] and "(2) Aspirin" in out.content


def test_search_queues_or_shows_by_memory_kind() -> None:
    ctx = _ctx()
    assert run(ctx, "enable_search", query="P2Y12").summary["new"] == ["D1", "D2", "D3", "D4"]
    with pytest.raises(ToolError, match="already searched"):
        run(ctx, "enable_search", query="p2y12")
    context = _ctx("context")
    out = run(context, "enable_search", query="P2Y12")
    assert "<document" in out.content and len(context.memory.in_context) == 4


def test_relevance_then_locate_caches_verified_quotes() -> None:
    ctx = _ctx()
    run(ctx, "enable_search", query="P2Y12")
    review = run(ctx, "relevance_analysis")
    assert review.summary["batch"] == ["D1", "D2"] and review.summary["relevant"] == ["D1"]
    located = run(ctx, "locate_evidence", doc_ids=["D1"])
    assert located.summary["cached"] == 1 and ctx.memory.grounded == ["D1"]
    with pytest.raises(ToolError, match="already quoted"):
        run(ctx, "locate_evidence", doc_ids=["D1"])
    with pytest.raises(ToolError, match="batch under review"):
        run(ctx, "locate_evidence", doc_ids=["D4"])
