"""The history-taking session store (``actors.interview_sessions``) without Ray: a scripted clinician model,
a fake retriever, a fake clock. Expiry, the session cap, typed errors, and a whole interview step by step."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

import pytest

from actors.interview_sessions import InterviewSessions, SessionConflict, SessionLimitReached, SessionNotFound
from medagent.api import InterviewAnswerRequest, InterviewSessionResponse
from medagent.config import InterviewSessionsConfig, LLMConfig
from medagent.history import HistoryTakingAgent
from medagent.history.agent.state import InterviewState
from medagent.llm.base import LLMError
from tests.configs import history_agent_config
from tests.fakes import ScriptedChatModel
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(
    *, max_turns: int = 3, ttl_s: float = 60.0, max_sessions: int = 2, model: Any = None
) -> tuple[InterviewSessions, Clock, FakeRetriever]:
    cfg = InterviewSessionsConfig(
        enabled=True, agent=history_agent_config(max_turns=max_turns), ttl_s=ttl_s, max_sessions=max_sessions
    )
    retriever, clock = FakeRetriever(), Clock()
    agent = HistoryTakingAgent(model or FakeClinician().model, cfg.agent, retriever, BagOfWordsEmbedder())
    return InterviewSessions(asdict(cfg), asdict(LLMConfig()), agent=agent, clock=clock), clock, retriever


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_whole_interview_step_by_step() -> None:
    sessions, _, retriever = make(max_turns=3)

    async def go() -> list[dict[str, Any]]:
        first = await sessions.start()
        out = [first]
        for answer in ["I have had a cough for three days.", "It started on Monday.", "About a week."]:
            out.append(await sessions.answer(first["session_id"], answer))
        out.append(await sessions.get(first["session_id"]))
        return out

    views = run(go())
    for v in views:
        InterviewSessionResponse.model_validate(v)  # the wire contract
    first, *answers, final_get = views
    assert first["status"] == "asking" and first["question"] and first["turn"] == 1
    assert [a["status"] for a in answers] == ["asking", "asking", "finished"]
    final = answers[-1]
    assert final["question"] is None and final["finish_reason"] and final["assessment"]["valid"]
    assert final["assessment"]["statement"].startswith("This is most likely")
    assert retriever.calls and retriever.calls[0]["return_parents"] is True
    # GET carries the agent's full state, which round-trips.
    state = InterviewState.from_dict(final_get["state"])
    assert state.turn == 3 and state.asked[0].answer == "I have had a cough for three days."
    assert final_get["status"] == "finished" and first["state"] is None


def test_unknown_expired_and_deleted_sessions_are_not_found() -> None:
    sessions, clock, _ = make(ttl_s=60)
    with pytest.raises(SessionNotFound):
        run(sessions.answer("nope", "hi"))
    with pytest.raises(SessionNotFound):
        run(sessions.get("nope"))
    with pytest.raises(SessionNotFound):
        run(sessions.delete("nope"))

    sid = run(sessions.start())["session_id"]
    clock.now += 59
    view = run(sessions.answer(sid, "A cough."))  # activity renews the lease
    assert view["expires_in_s"] == pytest.approx(60)
    clock.now += 60
    with pytest.raises(SessionNotFound, match="unknown or expired"):
        run(sessions.get(sid))
    assert run(sessions.count()) == 0

    sid = run(sessions.start())["session_id"]
    run(sessions.delete(sid))
    with pytest.raises(SessionNotFound):
        run(sessions.get(sid))


def test_the_cap_counts_live_sessions_only() -> None:
    sessions, clock, _ = make(max_sessions=2, ttl_s=10)
    a = run(sessions.start())["session_id"]
    run(sessions.start())
    with pytest.raises(SessionLimitReached, match="max_sessions=2"):
        run(sessions.start())
    run(sessions.delete(a))
    run(sessions.start())  # a freed slot
    clock.now += 11  # both expire
    run(sessions.start())
    assert run(sessions.count()) == 1


def test_finished_and_busy_sessions_conflict() -> None:
    sessions, _, _ = make(max_turns=1)
    sid = run(sessions.start())["session_id"]
    assert run(sessions.answer(sid, "A cough."))["status"] == "finished"
    with pytest.raises(SessionConflict, match="finished"):
        run(sessions.answer(sid, "More."))

    class Slow(ScriptedChatModel):  # yields to the loop on every call, as a real endpoint does
        async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
            await asyncio.sleep(0.001)
            return await super().complete(body)

    sessions, _, _ = make(max_turns=3, model=Slow(FakeClinician()))

    async def concurrent() -> list[Any]:
        sid = (await sessions.start())["session_id"]
        return await asyncio.gather(
            sessions.answer(sid, "A cough."), sessions.answer(sid, "Again."), return_exceptions=True
        )

    first, second = run(concurrent())
    assert isinstance(first, dict) and isinstance(second, SessionConflict)


def test_an_endpoint_failure_keeps_the_state_so_the_answer_can_be_resent() -> None:
    clinician = FakeClinician()
    fail = {"on": False}

    def script(body: dict[str, Any]) -> dict[str, Any]:
        if fail["on"]:
            raise LLMError("endpoint down")
        return clinician(body)

    sessions, _, _ = make(model=ScriptedChatModel(script))
    first = run(sessions.start())
    fail["on"] = True
    with pytest.raises(LLMError):
        run(sessions.answer(first["session_id"], "A cough."))
    after = run(sessions.get(first["session_id"]))
    assert after["turn"] == 1 and after["state"]["asked"][0]["answer"] is None
    fail["on"] = False
    assert run(sessions.answer(first["session_id"], "A cough."))["turn"] == 2


def test_config_is_checked() -> None:
    bad = InterviewSessionsConfig(agent=history_agent_config(mode="single_shot"))
    with pytest.raises(ValueError, match="amq"):
        InterviewSessions(asdict(bad), asdict(LLMConfig()), agent=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ttl_s"):
        InterviewSessions(asdict(InterviewSessionsConfig(ttl_s=0)), asdict(LLMConfig()), agent=object())  # type: ignore[arg-type]


def test_answer_bodies_are_validated() -> None:
    from pydantic import ValidationError

    assert InterviewAnswerRequest(answer="yes").answer == "yes"
    for body in ({}, {"answer": ""}, {"answer": "x" * 5000}, {"answer": "ok", "extra": 1}):
        with pytest.raises(ValidationError):
            InterviewAnswerRequest.model_validate(body)
