"""Run directories for the viewer's tests, written with the real ``RunDir`` (and, for an interview, the real
history-taking agent on the scripted fakes of the unit tests).

Two benchmark runs of ``b1`` (standalone and full) over q1..q5: q1 flips right -> wrong, q2 wrong -> right,
q3 is INVALID in full, q4 errored in full. Full's q1 trace has a search step whose documents carry text with
markup (``<script>``, ``<img onerror>``) and a quote the agent kept, which the page must show as text.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from medagent.config import BenchmarkConfig, LLMConfig, RunConfig
from medagent.run import RunDir
from medagent.types import Gold, Prediction, Question
from tests.configs import agent_config

GOLD = {"q1": "A", "q2": "B", "q3": "C", "q4": "D", "q5": "E"}
STANDALONE = {"q1": "A", "q2": "C", "q3": "C", "q4": "D", "q5": "A"}
FULL = {"q1": "B", "q2": "B", "q3": "INVALID", "q4": "INVALID", "q5": "A"}
QUOTE = "aspirin irreversibly inhibits cyclooxygenase"
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
DOC_TEXT = (
    f"Platelets and drugs. {HOSTILE} Low-dose Aspirin irreversibly inhibits   cyclooxygenase-1 in platelets."
)
DEPARTURES = ["memory bank keeps verified quotes, not whole documents"]


def questions() -> list[Question]:
    opts = {k: f"option {k} <b>bold?</b>" for k in "ABCDE"}
    return [
        Question(id=q, text=f"Question {q}: which drug? {HOSTILE}", options=opts, benchmark="b1")
        for q in GOLD
    ]


def search_trace() -> list[dict[str, Any]]:
    """Steps as the full agent writes them: a model turn, a search with per-document records, a gate, memory."""
    docs = [
        {"handle": "D1", "doc_id": "pubmed:1", "source": "pubmed", "title": "Aspirin", "score": 0.81,
         "rerank_score": 2.5, "text": DOC_TEXT},
        {"handle": "D2", "doc_id": "wiki:7", "source": "wikipedia", "title": "Platelet", "score": 0.42,
         "text": "Platelets are cell fragments."},
    ]  # fmt: skip
    return [
        {"step": 0, "kind": "model", "latency_s": 1.2, "prompt_tokens": 400, "completion_tokens": 30,
         "content": '{"name": "enable_search"}', "calls": ["enable_search"]},
        {"step": 1, "kind": "tool", "tool": "enable_search", "arguments": {"query": "aspirin <script>"},
         "ok": True, "executed": True, "result": {"retrieved": 2, "new": ["D1", "D2"], "documents": docs},
         "latency_s": 0.3, "prompt_tokens": 0, "completion_tokens": 0},
        {"step": 2, "kind": "gate", "method": "logprobs", "confidence": 0.2, "threshold": 0.3,
         "decision": "tools", "first_answer": "A", "tools_answer": "B"},
        {"step": 3, "kind": "memory", "evidence": 1, "pruned": 1},
        {"step": 4, "kind": "tool", "tool": "final_answer", "arguments": {"answer": "B"}, "ok": True},
    ]  # fmt: skip


def write_qa_run(root: Path, mode: str, answers: dict[str, str]) -> Path:
    rd = RunDir(root / f"b1-{mode}" / "run")
    cfg = RunConfig(
        benchmark=BenchmarkConfig(name="b1", loader="b1"),
        agent=agent_config(mode=mode),
        llm=LLMConfig(name="fake"),
    )
    rd.write_json(rd.manifest, {"config": asdict(cfg), "git_sha": None, "departures": DEPARTURES})
    rd.write_golds(Gold(id=q, answer=a, answer_text=f"option {a}") for q, a in GOLD.items())
    rd.write_questions(questions())
    preds = []
    for i, (qid, answer) in enumerate(answers.items()):
        errored = mode == "full" and qid == "q4"
        full_q1 = mode == "full" and qid == "q1"
        preds.append(
            Prediction(
                id=qid,
                benchmark="b1",
                answer=answer,
                raw=json.dumps({"answer": answer}),
                error="TimeoutError: endpoint" if errored else None,
                trace=search_trace() if full_q1 else [{"step": 0, "kind": "final_answer", "answer": answer}],
                evidence=[{"handle": "D1", "doc_id": "pubmed:1", "source": "pubmed", "title": "Aspirin",
                           "quote": QUOTE, "verified": True, "kind": "grounded"}] if full_q1 else [],
                usage={"prompt_tokens": 100 * (i + 1), "completion_tokens": 10, "llm_calls": 1},
                latency_s=1.0 + i,
            )
        )  # fmt: skip
    rd.append_predictions(preds)
    return rd.root


def write_interview_run(root: Path) -> Path:
    """An interview run dir with one row made by the real agent on scripted fakes."""
    from tests.unit.test_run_interviews import _row

    rd = RunDir(root / "interviews-amq" / "run")
    rd.write_json(rd.manifest, {"config": {"agent": {"mode": "amq"}, "llm": {"name": "fake"}}})
    row = _row("amq", "iv-1")
    # A refusal as the grounding check records one (the scripted interview grounds everything it hears).
    row["result"]["final_state"]["refused"] = [REFUSAL]
    rd.append_records(rd.interviews, [row], key="interview_id")
    return rd.root


REFUSAL = {
    "kind": "red_flag",
    "name": "haemoptysis",
    "value": "haemoptysis",
    "quote": "I have a cough",
    "reason": "the quote does not express haemoptysis (hemoptysis)",
    "turn": 2,
}


def write_runs(root: Path) -> list[Path]:
    return [
        write_qa_run(root, "standalone", STANDALONE),
        write_qa_run(root, "full", FULL),
        write_interview_run(root),
    ]
