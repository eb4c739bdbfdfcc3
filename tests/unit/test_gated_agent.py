"""The confidence gate (issue 18): logprob and sample confidence, the decision, the recorded trace."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from typing import Any

import pytest

from medagent.agent import build_agent, needs_retrieval
from medagent.agent.answers import locate_choice
from medagent.agent.confidence import agreement, letter_probability
from medagent.agent.services import AgentDeps
from medagent.config import AgentConfig, GateConfig
from medagent.llm.base import build_request, parse_chat_completion
from medagent.types import INVALID
from tests.configs import agent_config
from tests.unit._qa_fakes import AgentModel, FakeReranker, FakeRetriever, Q, fenced, make_docs, reply


def with_logprobs(content: str, letter_probs: dict[str, float], letter: str | None = None) -> dict[str, Any]:
    """A completion whose tokens spell ``content``; the token of the answer letter carries
    ``letter_probs`` as its alternatives (plus a non-letter one, as unconstrained logprobs have)."""
    letter = letter or max(letter_probs, key=letter_probs.__getitem__)
    at = content.index(f'"{letter}"') + 1 if f'"{letter}"' in content else content.rindex(letter)
    pieces = [content[:at], content[at], content[at + 1 :]]
    tokens = []
    for piece in pieces:
        if not piece:
            continue
        top = []
        if piece == letter:
            top = [{"token": k, "logprob": math.log(v)} for k, v in letter_probs.items()]
            top.append({"token": "The", "logprob": math.log(0.3)})
        lp = math.log(letter_probs[letter]) if piece == letter else -0.01
        tokens.append({"token": piece, "logprob": lp, "top_logprobs": top})
    out = reply(content, prompt_tokens=40, completion_tokens=6)
    out["choices"][0]["logprobs"] = {"content": tokens}
    return out


def test_logprobs_are_asked_for_and_parsed() -> None:
    body = build_request("m", [{"role": "user", "content": "x"}], top_logprobs=5)
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert "logprobs" not in build_request("m", [{"role": "user", "content": "x"}])
    resp = parse_chat_completion(with_logprobs('{"answer": "B"}', {"A": 0.1, "B": 0.3}))
    assert "".join(t.token for t in resp.logprobs) == '{"answer": "B"}'
    assert resp.logprobs[1].token == "B" and ("A", math.log(0.1)) in resp.logprobs[1].top


def test_letter_probability_renormalises_over_the_options() -> None:
    # B at 0.3 and A at 0.1 of the unconstrained distribution: 0.75 among the options.
    resp = parse_chat_completion(with_logprobs('{"answer": "B"}', {"A": 0.1, "B": 0.3}))
    assert letter_probability(resp, Q.options or {}) == pytest.approx(0.75)


def test_letter_probability_in_free_text_and_missing_cases() -> None:
    resp = parse_chat_completion(with_logprobs("The answer is C", {"C": 0.6, "A": 0.2}, "C"))
    assert letter_probability(resp, Q.options or {}) == pytest.approx(0.75)
    assert letter_probability(parse_chat_completion(reply('{"answer": "B"}')), Q.options or {}) is None
    unreadable = parse_chat_completion(with_logprobs("B or C", {"B": 0.5}, "B"))
    assert letter_probability(unreadable, Q.options or {}) is None  # INVALID: no confidence


def test_locate_choice_gives_the_letter_offset() -> None:
    assert locate_choice('{"answer": "C"}', {"A": "x", "C": "y"}) == ("C", 12)
    assert locate_choice("Clopidogrel", Q.options or {}) == ("B", None)  # named by its text
    assert locate_choice("", Q.options or {}) == (INVALID, None)


def test_agreement() -> None:
    assert agreement("B", ["B", "B", "A", "B"]) == 0.75
    assert agreement(INVALID, [INVALID, INVALID]) == 0.0
    assert agreement("B", []) == 0.0


def _services() -> AgentDeps:
    return AgentDeps(retriever=FakeRetriever(make_docs(4)), reranker=FakeReranker())


def _model(first: dict[str, Any]) -> AgentModel:
    """The first answer from ``first`` (the standalone call asks for logprobs); the tools' answer is B."""
    model = AgentModel([fenced("final_answer", {"answer": "B"})], final=reply('{"answer": "B"}'))
    route = model._route

    def script(body: dict[str, Any]) -> dict[str, Any]:
        if body.get("prompt") == "standalone_mc":
            return first  # the standalone prompt: the first answer and its samples
        return route(body)

    model.script = script
    return model


def _cfg(**gate: Any) -> AgentConfig:
    return agent_config(mode="gated", final_answer_call="fallback", gate=GateConfig(**gate))


def test_confident_first_answer_stands_without_tools() -> None:
    llm = _model(with_logprobs('{"answer": "A"}', {"A": 0.95, "B": 0.05}))
    pred = asyncio.run(build_agent(_cfg(threshold=0.9), llm, _services()).answer(Q))
    assert pred.answer == "A" and len(llm.requests) == 1
    gate = next(s for s in pred.trace if s["kind"] == "gate")
    assert gate["decision"] == "answer" and gate["method"] == "logprobs"
    assert gate["confidence"] == pytest.approx(0.95) and gate["tools"] is None
    assert pred.usage["llm_calls"] == 1 and pred.usage["prompt_tokens"] == 40
    # The first answer is the standalone agent's call: its prompt, its schema, its max_tokens.
    assert llm.requests[0]["response_format"]["json_schema"]["name"] == "answer"
    assert llm.requests[0]["max_tokens"] == 64


def test_unsure_first_answer_runs_the_tools_and_records_both() -> None:
    llm = _model(with_logprobs('{"answer": "A"}', {"A": 0.5, "B": 0.5}, "A"))
    pred = asyncio.run(build_agent(_cfg(threshold=0.9), llm, _services()).answer(Q))
    assert pred.answer == "B"
    gate = next(s for s in pred.trace if s["kind"] == "gate")
    assert gate["decision"] == "tools" and gate["first_answer"] == "A" and gate["tools_answer"] == "B"
    assert gate["tools"]["llm_calls"] >= 1
    assert [s["step"] for s in pred.trace] == list(range(len(pred.trace)))
    assert pred.usage["llm_calls"] == 1 + gate["tools"]["llm_calls"]


def test_record_both_runs_the_tools_but_keeps_the_gated_answer() -> None:
    llm = _model(with_logprobs('{"answer": "A"}', {"A": 0.99, "B": 0.01}))
    pred = asyncio.run(build_agent(_cfg(threshold=0.9, record_both=True), llm, _services()).answer(Q))
    gate = next(s for s in pred.trace if s["kind"] == "gate")
    assert pred.answer == "A" and gate["decision"] == "answer" and gate["tools_answer"] == "B"
    assert pred.evidence == []  # the tools' citations belong to an answer that was not given


def test_without_logprobs_the_gate_samples() -> None:
    first = reply('{"answer": "A"}')  # no logprobs block: the backend ignored the request
    llm = _model(first)
    agent = build_agent(_cfg(threshold=0.5, samples=3), llm, dataclasses.replace(_services(), logprobs=False))
    pred = asyncio.run(agent.answer(Q))
    gate = next(s for s in pred.trace if s["kind"] == "gate")
    assert gate["method"] == "samples" and gate["confidence"] == 1.0 and gate["check"]["llm_calls"] == 3
    sampled = [b for b in llm.requests if b.get("seed")]
    assert len(sampled) == 3 and all(b["temperature"] == 0.7 and b["top_p"] == 0.8 for b in sampled)
    assert "logprobs" not in llm.requests[0]


def test_auto_falls_back_to_samples_when_logprobs_do_not_come_back() -> None:
    llm = _model(reply('{"answer": "A"}'))
    pred = asyncio.run(build_agent(_cfg(threshold=0.5, samples=2), llm, _services()).answer(Q))
    gate = next(s for s in pred.trace if s["kind"] == "gate")
    assert gate["method"] == "samples" and llm.requests[0]["logprobs"] is True


def test_invalid_first_answer_always_goes_to_the_tools() -> None:
    llm = _model(with_logprobs("A or B", {"A": 1.0}, "A"))
    pred = asyncio.run(build_agent(_cfg(threshold=0.0, confidence="logprobs"), llm, _services()).answer(Q))
    gate = next(s for s in pred.trace if s["kind"] == "gate")
    assert gate["first_answer"] == INVALID and gate["decision"] == "tools" and pred.answer == "B"


def test_gate_config_is_checked_and_retrieval_follows_the_tools_mode() -> None:
    with pytest.raises(ValueError, match="confidence"):
        build_agent(_cfg(confidence="vibes"), _model(reply("")), _services())
    assert needs_retrieval(_cfg())
    assert not needs_retrieval(_cfg(tools_mode="no_search"))
    assert needs_retrieval(agent_config(mode="no_tools")) and not needs_retrieval(agent_config())
    with pytest.raises(KeyError, match="registered"):
        needs_retrieval(agent_config(mode="nope"))


def test_trace_is_json() -> None:
    llm = _model(with_logprobs('{"answer": "A"}', {"A": 0.5, "B": 0.5}, "A"))
    pred = asyncio.run(build_agent(_cfg(record_both=True), llm, _services()).answer(Q))
    assert json.loads(json.dumps(pred.to_dict()))["trace"]
