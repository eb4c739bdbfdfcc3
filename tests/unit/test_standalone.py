import asyncio
import dataclasses

import pytest

from medagent.agent import build_agent
from medagent.agent.services import AgentDeps
from medagent.config import AgentConfig
from medagent.types import INVALID, Gold, Question
from tests.fakes import ScriptedChatModel, completion

Q = Question(
    id="q1",
    text="Which drug is an antiplatelet P2Y12 inhibitor?",
    options={"A": "Aspirin", "B": "Clopidogrel"},
    benchmark="t",
)


def test_standalone_sends_question_and_options_with_schema() -> None:
    llm = ScriptedChatModel([completion('{"answer": "B"}', prompt_tokens=50, completion_tokens=4)])
    agent = build_agent(AgentConfig(), llm)
    pred = asyncio.run(agent.answer(Q))
    assert pred.answer == "B" and pred.error is None
    body = llm.requests[0]
    text = "\n".join(m["content"] for m in body["messages"])
    assert Q.text in text and "(A) Aspirin" in text and "(B) Clopidogrel" in text
    assert body["response_format"]["json_schema"]["schema"]["properties"]["answer"]["enum"] == ["A", "B"]
    assert body["temperature"] == 0.0 and body["top_p"] == 1.0
    call = {"prompt_tokens": 50, "completion_tokens": 4, "llm_calls": 1, "llm_ms": 0}
    assert pred.usage == {**call, "by_tag": {"standalone_mc": call}}
    assert pred.trace[0]["kind"] == "final_answer"


def test_standalone_unconstrained_when_backend_lacks_json_schema() -> None:
    llm = ScriptedChatModel([completion("The answer is (A).")])
    agent = build_agent(AgentConfig(), llm, AgentDeps(json_schema=False))
    pred = asyncio.run(agent.answer(Q))
    assert "response_format" not in llm.requests[0]
    assert pred.answer == "A"


def test_unparseable_reply_is_invalid_with_raw_kept() -> None:
    llm = ScriptedChatModel([completion("It depends on renal function.")])
    pred = asyncio.run(build_agent(AgentConfig(), llm).answer(Q))
    assert pred.answer == INVALID
    assert pred.raw == "It depends on renal function."


def test_open_ended_hides_options() -> None:
    llm = ScriptedChatModel([completion("Clopidogrel.")])
    pred = asyncio.run(build_agent(AgentConfig(open_ended=True), llm).answer(Q))
    text = "\n".join(m["content"] for m in llm.requests[0]["messages"])
    assert "Aspirin" not in text
    assert pred.answer == "Clopidogrel."


def test_agent_interface_has_no_room_for_gold() -> None:
    # Gold and Question share no fields beyond id, so a Gold can never stand in for a Question.
    q_fields = {f.name for f in dataclasses.fields(Question)}
    g_fields = {f.name for f in dataclasses.fields(Gold)}
    assert q_fields & g_fields == {"id"}


def test_unknown_mode_lists_registered() -> None:
    with pytest.raises(KeyError, match="standalone"):
        build_agent(AgentConfig(mode="nope"), ScriptedChatModel([]))
