"""The QA paper's answer protocol (issue 18 part 2): the retry of an unreadable answer, the step budget, the
model's generation limit."""

from __future__ import annotations

import asyncio
from typing import Any

from medagent.agent import build_agent
from medagent.agent.services import AgentDeps
from medagent.config import GateConfig
from medagent.types import INVALID
from tests.configs import agent_config
from tests.fakes import ScriptedChatModel, completion
from tests.unit._qa_fakes import AgentModel, FakeReranker, FakeRetriever, Q, make_docs, native, reply


def test_standalone_retries_an_unreadable_answer_at_the_papers_sampling() -> None:
    llm = ScriptedChatModel([completion("It depends."), completion("The answer is B.")])
    pred = asyncio.run(build_agent(agent_config(retry_invalid=True), llm).answer(Q))
    assert pred.answer == "B"
    assert [s["kind"] for s in pred.trace] == ["invalid_answer", "final_answer"] and pred.trace[1]["retry"]
    assert (llm.requests[1]["temperature"], llm.requests[1]["top_p"]) == (0.7, 0.8)
    assert pred.usage["prompt_tokens"] == 20


def test_without_retry_an_unreadable_answer_stays_invalid() -> None:
    llm = ScriptedChatModel([completion("It depends.")])
    pred = asyncio.run(build_agent(agent_config(), llm).answer(Q))
    assert pred.answer == INVALID and len(llm.requests) == 1


def test_retry_is_also_invalid_when_it_is_unreadable() -> None:
    llm = ScriptedChatModel([completion("Hmm."), completion("Both A and B.")])
    pred = asyncio.run(build_agent(agent_config(retry_invalid=True), llm).answer(Q))
    assert pred.answer == INVALID and pred.trace[-1]["kind"] == "final_answer"


def _full(model: AgentModel, **cfg: Any) -> Any:
    services = AgentDeps(retriever=FakeRetriever(make_docs(4)), reranker=FakeReranker())
    return build_agent(agent_config(mode="full", **cfg), model, services)


def test_full_agent_retries_its_last_call_when_the_model_never_answered() -> None:
    answers = iter([reply("no idea"), reply('{"answer": "C"}')])
    model = AgentModel([reply("thinking")], final=lambda body: next(answers))
    pred = asyncio.run(_full(model, max_steps=1, retry_invalid=True).answer(Q))
    finals = [s for s in pred.trace if s["kind"] in ("invalid_answer", "final_answer")]
    assert [s["kind"] for s in finals] == ["invalid_answer", "final_answer"] and pred.answer == "C"
    assert finals[1]["retry"] is True


def test_full_agent_keeps_its_committed_answer_rather_than_retrying() -> None:
    model = AgentModel([native("final_answer", {"answer": "A"})], final=reply("no idea"))
    pred = asyncio.run(_full(model, retry_invalid=True).answer(Q))
    assert pred.answer == "A" and len(model.of_kind("final")) == 1


def test_step_budget_follows_top_r_and_batch_size() -> None:
    assert agent_config().step_budget() == 24  # the QA paper: 32 / 4 = 8 batches
    assert agent_config(top_r=64).step_budget() == 40  # Fig. 3's largest TopR: all 16 batches
    assert agent_config(top_r=8).step_budget() == 12  # conf/scale/cpu.yaml
    assert agent_config(max_steps=3).step_budget() == 3


def test_generation_limits_are_capped_by_the_model() -> None:
    cfg = agent_config(
        max_tokens=256, step_max_tokens=512, tool_max_tokens=1024, gate=GateConfig(max_tokens=64)
    )
    capped = cfg.within(300)
    assert (capped.sampling.max_tokens, capped.loop.step_max_tokens, capped.loop.tool_max_tokens) == (
        256,
        300,
        300,
    )
    assert capped.gate.max_tokens == 64 and cfg.within(None) is cfg
