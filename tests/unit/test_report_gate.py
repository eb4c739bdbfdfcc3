"""The gate sweep derived from one gated run (medagent.report.gate), and its place in the report."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from medagent.config import AgentConfig, BenchmarkConfig, GateConfig, LLMConfig, RunConfig
from medagent.report import ReportOptions, build_report
from medagent.report.gate import arm, gate_records, side_by_side, sweep
from medagent.run import RunDir
from medagent.types import INVALID, Gold, Prediction

GOLD = {"q1": "A", "q2": "B", "q3": "C", "q4": "D"}
# (first answer, confidence, tools answer): q1 sure and right; q2 sure and wrong, tools right; q3 unsure and
# wrong, tools right; q4 unsure and right, tools wrong.
ROWS = {"q1": ("A", 0.95, "A"), "q2": ("C", 0.85, "B"), "q3": ("A", 0.4, "C"), "q4": ("D", 0.6, "A")}


def cost(calls: int, tokens: int, wall: float) -> dict[str, Any]:
    return {"llm_calls": calls, "prompt_tokens": tokens, "completion_tokens": 0, "wall_s": wall}


def gated_prediction(qid: str, record_both: bool = True, threshold: float = 0.9) -> Prediction:
    first, conf, tools = ROWS[qid]
    confident = conf >= threshold
    ran = record_both or not confident
    gate = {
        "step": 1, "kind": "gate", "method": "logprobs", "confidence": conf, "threshold": threshold,
        "decision": "answer" if confident else "tools", "first_answer": first, "first": cost(1, 100, 1.0),
        "check": cost(0, 0, 0.0), "tools_answer": tools if ran else None, "tools": cost(10, 5000, 60.0) if ran else None,
    }  # fmt: skip
    return Prediction(
        id=qid, benchmark="b1", answer=first if confident else tools,
        trace=[{"step": 0, "kind": "first_answer", "prompt_tokens": 100}, gate],
    )  # fmt: skip


GOLDS = {k: Gold(id=k, answer=v) for k, v in GOLD.items()}


def test_every_arm_is_derived_from_one_run() -> None:
    preds = [gated_prediction(q) for q in GOLD]
    rows = {(r["arm"], r["threshold"]): r for r in sweep(preds, GOLDS, [0.0, 0.5, 0.9, 1.01])}
    assert rows[("standalone", None)]["accuracy"] == 0.5  # q1, q4
    assert rows[("full", None)]["accuracy"] == 0.75  # q1, q2, q3
    assert rows[("standalone", None)]["llm_calls"] == 1 and rows[("full", None)]["llm_calls"] == 10
    # Threshold 0: every first answer stands (standalone's answers at standalone's cost).
    assert rows[("gated", 0.0)]["accuracy"] == 0.5 and rows[("gated", 0.0)]["tools_share"] == 0.0
    # 0.5: q3 goes to the tools (wrong -> right); q1, q2, q4 stand.
    g = rows[("gated", 0.5)]
    assert g["accuracy"] == 0.75 and g["wrong_to_right"] == 1 and g["right_to_wrong"] == 0
    assert g["llm_calls"] == pytest.approx((1 + 1 + 11 + 1) / 4) and g["wall_s"] == pytest.approx(64 / 4)
    # 0.9: q2, q3, q4 go to the tools: q4 flips right -> wrong.
    g = rows[("gated", 0.9)]
    assert g["accuracy"] == 0.75 and g["right_to_wrong"] == 1 and g["wrong_to_right"] == 2
    # Above every confidence: the tools answer everything, at first + tools cost.
    assert rows[("gated", 1.01)]["accuracy"] == 0.75 and rows[("gated", 1.01)]["llm_calls"] == 11
    assert all(r["ci95_lo"] <= r["accuracy"] <= r["ci95_hi"] for r in rows.values())
    # Paired on the same questions: full - standalone = (+1 q2, +1 q3, -1 q4) / 4.
    full = rows[("full", None)]
    assert full["delta"] == pytest.approx(0.25) and full["delta_ci95_lo"] <= 0.25 <= full["delta_ci95_hi"]
    assert rows[("gated", 0.0)]["delta"] == 0.0 and rows[("gated", 0.0)]["delta_ci95_hi"] == 0.0


def test_curve_adds_every_distinct_confidence() -> None:
    preds = [gated_prediction(q) for q in GOLD]
    thresholds = {r["threshold"] for r in sweep(preds, GOLDS, [0.9], curve=True) if r["arm"] == "gated"}
    assert thresholds == {0.9, 0.95, 0.85, 0.4, 0.6}


def test_without_record_both_unrun_tools_leave_questions_out() -> None:
    preds = [gated_prediction(q, record_both=False) for q in GOLD]
    assert arm(gate_records(preds), "full") and len(arm(gate_records(preds), "full")) == 3  # q1 was sure
    rows = {(r["arm"], r["threshold"]): r for r in sweep(preds, GOLDS, [0.9, 0.99])}
    assert rows[("gated", 0.9)]["n"] == 4 and rows[("gated", 0.99)]["n"] == 3


def test_errored_question_counts_wrong_in_every_arm() -> None:
    preds = [
        gated_prediction("q1"),
        Prediction(id="q2", benchmark="b1", answer=INVALID, error="LLMError: down"),
    ]
    rows = sweep(preds, GOLDS, [0.5])
    assert all(r["n"] == 2 and r["accuracy"] == 0.5 for r in rows)
    with pytest.raises(ValueError, match="arm"):
        arm(gate_records(preds), "gated")  # a threshold is required


def test_side_by_side_lists_each_question_and_the_arms() -> None:
    text = side_by_side([gated_prediction(q) for q in GOLD], GOLDS, 0.9)
    assert "q3" in text and "0.40" in text and "gated@0.9" in text and "standalone" in text
    # The demo's cost lines: tokens sent, evaluated (— where the backend did not report it) and decoded.
    assert "sent tok/q" in text and "evaluated/q" in text and "decoded/q" in text


def test_report_has_the_gate_table_and_pareto_figure(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "runs" / "gated")
    cfg = RunConfig(
        benchmark=BenchmarkConfig(name="b1", loader="b1"),
        agent=AgentConfig(mode="gated", gate=GateConfig(record_both=True)),
        llm=LLMConfig(name="fake-llm"),
    )
    rd.write_json(rd.manifest, {"config": asdict(cfg), "git_sha": None})
    rd.write_golds(GOLDS.values())
    rd.append_predictions([gated_prediction(q) for q in GOLD])
    opts = ReportOptions(gate_thresholds=[0.5, 0.9], bootstrap_samples=50)
    report = build_report([str(tmp_path / "runs")], tmp_path / "report", opts)
    table = report.tables["gate_sweep"]
    assert [(r["arm"], r["threshold"]) for r in table.records] == [
        ("standalone", None), ("full", None), ("gated", 0.5), ("gated", 0.9),
    ]  # fmt: skip
    assert len(report.tables["gate_curve"].records) > len(table.records)
    assert report.figures["gate_pareto"] is not None and report.figures["gate_pareto"].exists()
    assert "Confidence gate" in report.markdown and (tmp_path / "report" / "gate_sweep.csv").exists()


def test_evaluated_tokens_sum_over_the_parts_and_stay_unknown_where_unreported() -> None:
    from medagent.report.gate import _cost, _plus

    first, tools = _cost({**cost(1, 100, 1.0), "evaluated_tokens": 20}), _cost(cost(3, 900, 9.0))
    assert _plus(first, tools)["evaluated_tokens"] == 20.0 and tools["evaluated_tokens"] is None
    assert _plus(tools, tools)["evaluated_tokens"] is None and _plus(first, tools)["prompt_tokens"] == 1000.0
