"""The typed steps of an episode (medagent.agent.episode): each writes its messages and its trace record."""

from __future__ import annotations

from medagent.agent.episode import (
    Episode,
    FinalAnswer,
    Gate,
    MemorySnapshot,
    ModelTurn,
    Observation,
    Recorded,
    Retrieval,
    ToolStep,
)
from medagent.agent.toolcalls import Call
from medagent.llm.base import ChatResponse, Usage

NATIVE = Call("enable_search", {"query": "P2Y12"}, "call_0", "native")
TEXT = Call("relevance_analysis", {}, "call_1", "text")


def test_model_turn_writes_the_assistant_message_with_native_calls() -> None:
    turn = ModelTurn("thinking", {"latency_s": 1.0}, [NATIVE, TEXT], reply="thinking, at length")
    (msg,) = turn.messages()
    assert msg["role"] == "assistant" and msg["content"] == "thinking"
    assert [c["function"]["name"] for c in msg["tool_calls"]] == [
        "enable_search"
    ]  # text calls stay in the text
    assert turn.record() == {"kind": "model", "latency_s": 1.0, "content": "thinking, at length",
                             "calls": ["enable_search", "relevance_analysis"]}  # fmt: skip


def test_tool_step_answers_a_native_call_and_records_what_ran() -> None:
    step = ToolStep(NATIVE, "8 documents queued", True, True, {"new": ["D1"]}, 0.5, {"llm_calls": 0})
    assert step.messages() == [{"role": "tool", "tool_call_id": "call_0", "content": "8 documents queued"}]
    rec = step.record()
    assert rec["tool"] == "enable_search" and rec["executed"] and rec["result"] == {"new": ["D1"]}
    assert rec["llm_calls"] == 0 and rec["latency_s"] == 0.5
    refused = ToolStep(TEXT, "Not run: ...")
    assert refused.messages() == [] and refused.record()["executed"] is False
    assert refused.record()["result"] == "Not run: ..."


def test_observation_is_traced_only_as_feedback() -> None:
    feedback = Observation("Your reply was empty.", error="empty")
    assert feedback.messages() == [{"role": "user", "content": "Your reply was empty."}]
    assert feedback.record() == {"kind": "observation", "error": "empty", "message": "Your reply was empty."}
    assert Observation("<tool_result ...>").record() is None


def test_record_only_steps() -> None:
    assert FinalAnswer({"answer": "B"}).record() == {"kind": "final_answer", "answer": "B"}
    assert FinalAnswer({"answer": "?"}, kind="invalid_answer").record()["kind"] == "invalid_answer"
    assert MemorySnapshot({"evidence": 2}).record() == {"kind": "memory", "evidence": 2}
    assert Retrieval({"docs": []}).record()["kind"] == "retrieval" and Gate().record() == {"kind": "gate"}
    assert Recorded({"step": 7, "kind": "tool"}).record() == {"kind": "tool"}
    assert all(s.messages() == [] for s in (FinalAnswer(), MemorySnapshot(), Gate(), Recorded({})))


def test_episode_makes_the_conversation_and_the_numbered_trace_from_one_list() -> None:
    ep = Episode(prompt=[{"role": "system", "content": "instructions"}])
    ep.add(ModelTurn("", ep.llm(ChatResponse("", usage=Usage(10, 2), latency_s=0.25)), [NATIVE]))
    ep.add(ToolStep(NATIVE, "queued", True, True))
    ep.add(Observation("results as text"))
    ep.add(FinalAnswer({"answer": "B"}))
    assert [m["role"] for m in ep.messages] == ["system", "assistant", "tool", "user"]
    assert [(r["step"], r["kind"]) for r in ep.trace()] == [(0, "model"), (1, "tool"), (2, "final_answer")]
    ep.tool_calls += 1
    call = {"prompt_tokens": 10, "completion_tokens": 2, "llm_calls": 1, "llm_ms": 250}
    assert ep.usage() == {**call, "tool_calls": 1, "retrieval_calls": 0, "retrieval_ms": 0,
                          "by_tag": {"other": call}}  # fmt: skip
    before = ep.snapshot()
    ep.retrieval(0.5)
    assert ep.delta(before)["retrieval_s"] == 0.5 and ep.counts.retrieval_calls == 1


def test_a_model_step_records_what_the_engine_read_and_decoded_by_prompt() -> None:
    ep = Episode()
    usage = Usage(100, 20, cached_tokens=80, evaluated_tokens=20, prompt_ms=150.0, decode_ms=900.0)
    fields = ep.llm(ChatResponse("", usage=usage, latency_s=1.1, prompt="qa_agent_system"))
    assert fields["prompt"] == "qa_agent_system"
    assert (fields["cached_tokens"], fields["evaluated_tokens"], fields["decode_ms"]) == (80, 20, 900.0)
    ep.llm(ChatResponse("", usage=Usage(30, 5), latency_s=0.1, prompt="perform_comparison"))
    u = ep.usage()
    assert (u["cached_tokens"], u["evaluated_tokens"], u["completion_tokens"], u["decode_ms"]) == (
        80,
        20,
        25,
        900,
    )
    assert u["by_tag"]["qa_agent_system"]["evaluated_tokens"] == 20
    assert "evaluated_tokens" not in u["by_tag"]["perform_comparison"]
