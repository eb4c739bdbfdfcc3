"""The terminal rendering of one answered question."""

from __future__ import annotations

from medagent.run.trace_view import format_example, format_step
from medagent.types import Gold, Prediction, Question


def test_a_tool_step_shows_tool_arguments_cost_and_result() -> None:
    line = format_step({"step": 3, "kind": "tool", "tool": "enable_search", "arguments": {"query": "gout"},
                        "result": "8 documents queued", "latency_s": 1.2, "prompt_tokens": 512,
                        "completion_tokens": 40})  # fmt: skip
    assert line.startswith('#3 tool enable_search {"query": "gout"}')
    assert "[1.20s, 512+40 tok]" in line and "-> 8 documents queued" in line


def test_example_lists_steps_answer_verdict_and_cited_evidence() -> None:
    q = Question(
        id="q1", text="Which crystal causes gout?", options={"A": "urate", "B": "CPPD"}, benchmark="medqa"
    )
    pred = Prediction(
        id="q1", benchmark="medqa", answer="A",
        trace=[{"step": 0, "kind": "model", "latency_s": 0.5, "prompt_tokens": 10, "completion_tokens": 5}],
        evidence=[{"source": "medquad", "doc_id": "d7", "quote": "Gout is caused by urate crystals.", "verified": True},
                  {"source": "bioasq", "doc_id": "d9", "quote": "made up", "verified": False}],
        usage={"prompt_tokens": 10, "llm_calls": 1},
    )  # fmt: skip
    text = format_example(q, pred, Gold(id="q1", answer="A"))
    assert "question q1 (medqa)" in text and "A. urate" in text
    assert "answer: A  (correct)" in text
    assert '[medquad:d7] "Gout is caused by urate crystals."' in text
    assert "(quote not found in the document)" in text
    assert "usage: prompt_tokens=10, llm_calls=1" in text
    wrong = format_example(q, Prediction(id="q1", benchmark="medqa", answer="B"), Gold(id="q1", answer="A"))
    assert "(gold: A)" in wrong and "evidence cited: none" in wrong


def test_gate_step_shows_the_decision() -> None:
    from medagent.run.trace_view import format_step

    step = {"step": 1, "kind": "gate", "decision": "tools", "confidence": 0.35, "method": "logprobs",
            "threshold": 0.9, "first_answer": "C", "tools_answer": "D"}  # fmt: skip
    line = format_step(step)
    assert "tools: confidence 0.35 (logprobs) vs 0.9" in line and "first answer C, tools D" in line
