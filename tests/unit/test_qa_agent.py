"""The tool-using QA agent: every mode completes, memory semantics, budgets, answers, errors."""

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from medagent.agent import QAAgent, build_agent
from medagent.agent.services import AgentDeps
from medagent.llm.base import LLMError
from medagent.types import INVALID, Prediction
from tests.configs import agent_config
from tests.unit._qa_fakes import (
    AgentModel,
    FakeReranker,
    FakeRetriever,
    Q,
    fenced,
    kind_of,
    make_docs,
    native,
    reply,
)


def _agent(model: AgentModel, docs: int = 8, **cfg: Any) -> tuple[Any, FakeRetriever, FakeReranker]:
    retriever, reranker = FakeRetriever(make_docs(docs)), FakeReranker()
    cfg.setdefault("mode", "full")
    services = AgentDeps(retriever=retriever, reranker=reranker, json_schema=True)
    return build_agent(agent_config(**cfg), model, services), retriever, reranker


def _steps(pred: Prediction, kind: str) -> list[dict[str, Any]]:
    return [s for s in pred.trace if s["kind"] == kind]


FULL_SCRIPT = [
    native("perform_comparison", {"question": Q.text, "options": Q.options}),
    fenced("enable_search", {"query": "P2Y12 inhibitor"}),
    native("relevance_analysis", {}),
    native("locate_evidence", {"doc_ids": ["D1"]}),
    native("final_answer", {"answer": "B"}),
]


def test_full_mode_runs_the_tools_the_model_picks_and_answers_from_the_memory_bank() -> None:
    model = AgentModel(list(FULL_SCRIPT))
    agent, retriever, reranker = _agent(model, top_k=32, top_r=8, batch_size=4)
    pred = asyncio.run(agent.answer(Q))
    assert pred.answer == "B" and pred.error is None
    # Tools go out as OpenAI function schemas; the model chose every call.
    names = [t["function"]["name"] for t in model.of_kind("turn")[0]["tools"]]
    assert names == [
        "perform_comparison",
        "enable_search",
        "relevance_analysis",
        "locate_evidence",
        "final_answer",
    ]
    assert retriever.calls == [("P2Y12 inhibitor", 32)] and reranker.calls == [("P2Y12 inhibitor", 8, 8)]
    tools = _steps(pred, "tool")
    assert [s["tool"] for s in tools] == [
        "perform_comparison",
        "enable_search",
        "relevance_analysis",
        "locate_evidence",
        "final_answer",
    ]
    assert all(s["ok"] for s in tools)
    assert tools[1]["origin"] == "text" and tools[1]["retrieval_s"] >= 0
    assert tools[2]["llm_calls"] == 1 and tools[2]["prompt_tokens"] == 10
    # Evidence: D1 was quoted (verified); D2-D4 were reviewed but never grounded, so pruned.
    assert [(e["handle"], e["doc_id"], e["source"], e["verified"]) for e in pred.evidence] == [
        ("D1", "doc1", "pubmed", True)
    ]
    assert "P2Y12 receptor" in pred.evidence[0]["quote"]
    memory = _steps(pred, "memory")[0]
    assert memory["pruned"] == ["D2", "D3", "D4"] and memory["batches_reviewed"] == 1
    # The last call sees the conversation and the memory bank, never the raw documents.
    final = model.of_kind("final")[0]
    text = json.dumps(final["messages"])
    assert '<evidence id=\\"D1\\"' in text and "Document 2 text" not in text and "Document 1 text" not in text
    assert final["response_format"]["json_schema"]["schema"]["properties"]["answer"]["enum"] == [
        "A",
        "B",
        "C",
    ]
    assert _steps(pred, "final_answer")[0]["reason"] == "model"
    assert pred.usage["llm_calls"] == 5 + 3 + 1 and pred.usage["tool_calls"] == 4
    assert pred.usage["retrieval_calls"] == 2
    # Text-written calls get their results as a delimited block; native calls as tool messages.
    turn3 = model.of_kind("turn")[2]["messages"]
    assert turn3[-1]["role"] == "user" and turn3[-1]["content"].startswith(
        '<tool_result name="enable_search">'
    )
    assert model.of_kind("turn")[3]["messages"][-1]["role"] == "tool"


def test_an_external_memory_bank_is_filled_in_place() -> None:
    agent, _, _ = _agent(AgentModel(list(FULL_SCRIPT)), top_r=8)
    assert isinstance(agent, QAAgent)
    bank = agent.new_memory(Q)
    pred = asyncio.run(agent.answer(Q, memory=bank))
    assert bank.grounded == ["D1"] and bank.records() == pred.evidence and bank.docs == {}


def test_review_stops_after_ceil_r_over_b_batches() -> None:
    turns = [native("enable_search", {"query": "p2y12"})] + [native("relevance_analysis", {})] * 4
    model = AgentModel([*turns, native("final_answer", {"answer": "B"})])
    agent, _, _ = _agent(model, docs=20, top_r=6, batch_size=4)
    pred = asyncio.run(agent.answer(Q))
    reviews = [s for s in _steps(pred, "tool") if s["tool"] == "relevance_analysis"]
    assert [s["ok"] for s in reviews] == [True, True, False, False]
    assert len(model.of_kind("relevance")) == 2  # ceil(6 / 4)
    assert "review batches are used" in model.of_kind("turn")[4]["messages"][-1]["content"]
    assert pred.answer == "B"


def test_token_budget_forces_the_answer() -> None:
    big = reply(
        "", [{"id": "c", "type": "function", "function": {"name": "perform_comparison", "arguments": "{}"}}]
    )
    big["usage"] = {"prompt_tokens": 3000, "completion_tokens": 10}
    model = AgentModel([big, native("enable_search", {"query": "x"})])
    agent, retriever, _ = _agent(model, max_conversation_tokens=3200, step_max_tokens=256)
    pred = asyncio.run(agent.answer(Q))
    assert len(model.of_kind("turn")) == 1 and retriever.calls == []
    assert _steps(pred, "final_answer")[0]["reason"] == "token_budget"
    assert pred.answer == "B"


def test_step_budget_forces_the_answer() -> None:
    model = AgentModel([native("perform_comparison", {"question": "q"})] * 10)
    agent, _, _ = _agent(model, max_steps=3)
    pred = asyncio.run(agent.answer(Q))
    assert len(model.of_kind("turn")) == 3
    assert _steps(pred, "final_answer")[0]["reason"] == "max_steps" and pred.answer == "B"


MISTAKES = {
    "malformed_json": (
        reply('```json\n{"name": "enable_search", "arguments": {"query": }\n```'),
        "could not be read",
    ),
    "unknown_tool": (native("search_web", {"query": "x"}), "unknown tool 'search_web'"),
    "missing_argument": (native("enable_search", {}), "'query' must be a non-empty string"),
    "wrong_argument_type": (native("enable_search", {"query": 7}), "'query' must be a non-empty string"),
    "arguments_not_json": (native("enable_search", '{"query": "x"'), "not valid JSON"),
    "empty_reply": (reply(""), "Your reply was empty"),
    "overlong_reply": (reply("Let me think. " * 400, finish_reason="length"), "cut off at the length limit"),
    "no_call_no_answer": (reply("I need to think about platelets."), "no tool call and no answer"),
    "locate_before_review": (native("locate_evidence", {"doc_ids": ["D1"]}), "only documents of the batch"),
    "review_before_search": (native("relevance_analysis", {}), "call enable_search first"),
    "bad_final_answer": (native("final_answer", {"answer": "Z"}), "one of A, B, C"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_model_mistakes_become_observations_and_the_loop_goes_on(mistake: str) -> None:
    bad, expected = MISTAKES[mistake]
    model = AgentModel([bad, native("final_answer", {"answer": "C"})], final=reply('{"answer": "C"}'))
    agent, _, _ = _agent(model)
    pred = asyncio.run(agent.answer(Q))
    second = model.of_kind("turn")[1]["messages"]
    feedback = second[-1]["content"]
    assert expected in feedback, feedback
    assert pred.answer == "C" and pred.error is None
    if mistake == "overlong_reply":  # the cut-off reply is not kept whole in the conversation
        assert len(second[-2]["content"]) < 1000


def test_text_embedded_call_runs_like_a_native_one() -> None:
    model = AgentModel([fenced("perform_comparison", {"question": Q.text}), reply("The answer is (B).")])
    agent, _, _ = _agent(model, final_answer_call="fallback")
    pred = asyncio.run(agent.answer(Q))
    assert _steps(pred, "tool")[0]["tool"] == "perform_comparison" and _steps(pred, "tool")[0]["ok"]
    assert pred.answer == "B" and model.of_kind("final") == []  # fallback: the model's own answer stands


def test_call_and_answer_in_one_reply_runs_the_call_and_sets_the_answer_aside() -> None:
    both = fenced("enable_search", {"query": "p2y12"}, after="\nThe answer is A.")
    model = AgentModel([both, native("final_answer", {"answer": "B"})])
    agent, retriever, _ = _agent(model, final_answer_call="fallback")
    pred = asyncio.run(agent.answer(Q))
    assert retriever.calls and pred.answer == "B"
    assert "that answer was set aside" in model.of_kind("turn")[1]["messages"][-1]["content"]
    assert [s["error"] for s in _steps(pred, "observation")] == ["answer_with_call"]


def test_final_answer_with_other_calls_is_not_taken() -> None:
    calls = [
        {"id": "a", "type": "function", "function": {"name": "enable_search", "arguments": '{"query": "x"}'}},
        {"id": "b", "type": "function", "function": {"name": "final_answer", "arguments": '{"answer": "A"}'}},
    ]
    model = AgentModel([reply("", calls), native("final_answer", {"answer": "B"})])
    agent, _, _ = _agent(model, final_answer_call="fallback")
    assert asyncio.run(agent.answer(Q)).answer == "B"
    tool_msgs = [m for m in model.of_kind("turn")[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["a", "b"] and "Not recorded" in tool_msgs[1]["content"]


def test_unparseable_final_answer_is_invalid_with_raw_kept() -> None:
    model = AgentModel([reply("Hmm.")], final=reply("It depends on renal function."))
    agent, _, _ = _agent(model, max_steps=1)
    pred = asyncio.run(agent.answer(Q))
    assert pred.answer == INVALID and pred.raw == "It depends on renal function."


def test_unconstrained_final_call_when_the_backend_lacks_json_schema() -> None:
    model = AgentModel([native("final_answer", {"answer": "B"})], final=reply("The answer is (C)."))
    agent = build_agent(agent_config(mode="no_search"), model, AgentDeps(json_schema=False))
    pred = asyncio.run(agent.answer(Q))
    assert "response_format" not in model.of_kind("final")[0] and pred.answer == "C"


def test_llm_error_propagates_and_the_bank_is_still_cleared() -> None:
    model = AgentModel(
        [native("enable_search", {"query": "x"}), native("relevance_analysis", {})],
        relevance=lambda body: (_ for _ in ()).throw(LLMError("endpoint down")),
    )
    agent, _, _ = _agent(model)
    bank = agent.new_memory(Q)
    with pytest.raises(LLMError, match="endpoint down"):
        asyncio.run(agent.answer(Q, memory=bank))
    assert bank.docs == {}
    with pytest.raises(LLMError):
        asyncio.run(_agent(AgentModel([LLMError("turn failed")]))[0].answer(Q))


def test_no_cache_prune_puts_search_results_straight_into_the_conversation() -> None:
    model = AgentModel([native("enable_search", {"query": "p2y12"}), native("final_answer", {"answer": "B"})])
    agent, _, _ = _agent(model, mode="no_cache_prune", top_r=3)
    pred = asyncio.run(agent.answer(Q))
    turn = model.of_kind("turn")[1]
    assert [t["function"]["name"] for t in turn["tools"]] == [
        "perform_comparison",
        "enable_search",
        "final_answer",
    ]
    result = turn["messages"][-1]
    assert result["role"] == "tool" and result["content"].count("<document id=") == 3
    assert [(e["handle"], e["kind"]) for e in pred.evidence] == [
        ("D1", "context"),
        ("D2", "context"),
        ("D3", "context"),
    ]
    assert model.of_kind("relevance") == [] and pred.answer == "B"


def test_no_cache_prune_cuts_documents_to_the_budget_for_the_answer() -> None:
    search = native("enable_search", {"query": "p2y12"})
    search["usage"] = {}  # no usage reported: the agent estimates at 4 characters per token
    model = AgentModel([search])
    long_docs = [dataclasses.replace(d, content=d.content + " More text." * 200) for d in make_docs(8)]
    retriever, reranker = FakeRetriever(long_docs), FakeReranker()
    cfg = agent_config(mode="no_cache_prune", top_r=8, max_conversation_tokens=3000, doc_max_chars=1500)
    agent = build_agent(cfg, model, AgentDeps(retriever=retriever, reranker=reranker))
    pred = asyncio.run(agent.answer(Q))
    final = model.of_kind("final")[0]["messages"]
    assert _steps(pred, "final_answer")[0]["reason"] == "token_budget"
    # 8 documents of 1,500 characters would not fit 3,000 tokens minus the answer's 64.
    assert sum(len(json.dumps(m)) for m in final) / 4 <= 3000 - 64
    assert "[cut to fit the context budget]" in final[-2]["content"] and final[0]["role"] == "system"


def test_no_search_needs_no_services_and_offers_no_search() -> None:
    model = AgentModel(
        [native("perform_comparison", {"question": Q.text}), native("final_answer", {"answer": "B"})]
    )
    pred = asyncio.run(build_agent(agent_config(mode="no_search"), model).answer(Q))
    names = [t["function"]["name"] for t in model.of_kind("turn")[0]["tools"]]
    assert names == ["perform_comparison", "final_answer"] and pred.answer == "B" and pred.evidence == []
    assert "Memory bank" not in model.of_kind("final")[0]["messages"][-1]["content"]


def test_no_tools_answers_once_with_the_top_three_documents() -> None:
    model = AgentModel([])
    agent, retriever, reranker = _agent(model, mode="no_tools")
    pred = asyncio.run(agent.answer(Q))
    assert retriever.calls == [(Q.text, 32)] and reranker.calls == [(Q.text, 8, 3)]
    (call,) = model.requests
    assert "tools" not in call and call["messages"][1]["content"].count("<document id=") == 3
    assert pred.answer == "B" and [e["doc_id"] for e in pred.evidence] == ["doc1", "doc2", "doc3"]


def test_open_ended_hides_options_and_generates_candidates() -> None:
    model = AgentModel(
        [
            native("generate_options", {"question": Q.text}),
            native("perform_comparison", {"question": Q.text}),
        ],
        final=reply("Clopidogrel"),
    )
    agent, _, _ = _agent(model, open_ended=True, max_steps=2)
    pred = asyncio.run(agent.answer(Q))
    assert pred.answer == "Clopidogrel"
    first = model.of_kind("turn")[0]
    assert [t["function"]["name"] for t in first["tools"]][0] == "generate_options"
    assert "Warfarin" not in json.dumps([b["messages"] for b in model.requests])
    assert "(1) Clopidogrel" in model.of_kind("compare")[0]["messages"][-1]["content"]
    assert "response_format" not in model.of_kind("final")[0]


@pytest.mark.parametrize("mode", ["full", "no_cache_prune", "no_tools"])
def test_search_modes_refuse_to_build_without_services(mode: str) -> None:
    with pytest.raises(ValueError, match="retriever"):
        build_agent(agent_config(mode=mode), AgentModel([]))


class _PerQuestion(AgentModel):
    """Agent turns scripted per question (picked by the question text), for concurrent runs."""

    def __init__(self, scripts: dict[str, list[dict[str, Any]]]) -> None:
        super().__init__(
            [], final=lambda body: reply('{"answer": "%s"}' % ("A" if "q2:" in str(body) else "B"))
        )
        self.scripts = scripts

    def _route(self, body: dict[str, Any]) -> dict[str, Any]:
        if kind_of(body) == "turn":
            return self.scripts["q2" if "q2:" in body["messages"][1]["content"] else "q1"].pop(0)
        return super()._route(body)


def test_concurrent_questions_do_not_share_state() -> None:
    model = _PerQuestion({"q1": list(FULL_SCRIPT), "q2": [native("final_answer", {"answer": "A"})]})
    agent, _, _ = _agent(model, top_r=8)
    q2 = dataclasses.replace(Q, id="q2", text="q2: " + Q.text)

    async def both() -> list[Prediction]:
        return list(await asyncio.gather(agent.answer(Q), agent.answer(q2)))

    p1, p2 = asyncio.run(both())
    assert (p1.answer, p2.answer) == ("B", "A")
    assert len(p1.evidence) == 1 and p2.evidence == [] and p2.usage["tool_calls"] == 0


def test_prediction_round_trips_with_evidence() -> None:
    agent, _, _ = _agent(AgentModel(list(FULL_SCRIPT)), top_r=8)
    pred = asyncio.run(agent.answer(Q))
    again = Prediction.from_dict(json.loads(json.dumps(pred.to_dict())))
    assert again == pred and again.evidence[0]["doc_id"] == "doc1"


def test_documents_memory_keeps_the_grounded_documents_for_the_answer() -> None:
    model = AgentModel(list(FULL_SCRIPT))
    agent, _, _ = _agent(model, top_k=32, top_r=8, batch_size=4, memory="documents")
    pred = asyncio.run(agent.answer(Q))
    assert pred.answer == "B" and pred.error is None
    memory = _steps(pred, "memory")[0]
    assert memory["grounded"] == ["D1"] and memory["pruned"] == ["D2", "D3", "D4"]
    assert memory["kept_documents"] == 1
    # The answer reads the grounded document whole (the paper's M_i); ungrounded ones are gone.
    text = json.dumps(model.of_kind("final")[0]["messages"])
    assert '<document id=\\"D1\\"' in text and "Document 1 text" in text and "Document 2 text" not in text
    assert "the documents you grounded" in text


def test_plain_feedback_gives_results_without_next_step_hints() -> None:
    hinted, plain = AgentModel(list(FULL_SCRIPT)), AgentModel(list(FULL_SCRIPT))
    for model, feedback in ((hinted, "qa_tools"), (plain, "qa_tools_plain")):
        cfg = agent_config(mode="full", top_k=32, top_r=8, batch_size=4)
        cfg = dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, feedback=feedback))
        services = AgentDeps(retriever=FakeRetriever(make_docs(8)), reranker=FakeReranker(), json_schema=True)
        agent = build_agent(cfg, model, services)
        assert asyncio.run(agent.answer(Q)).answer == "B"
    after_search = {m: json.dumps(m.of_kind("turn")[2]["messages"][-1]) for m in (hinted, plain)}
    assert "Call relevance_analysis" in after_search[hinted]
    assert "Call" not in after_search[plain] and "not yet reviewed" in after_search[plain]
