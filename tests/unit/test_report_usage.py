"""Tool usage from traces (Fig. 2a/2b data): calls per tool, per-question call-count bins, missing traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from medagent.report.loader import load_runs
from medagent.report.usage import bin_of, llm_calls, tool_calls, tool_distribution_table, tool_usage_table
from medagent.types import Prediction
from tests.unit._report_fakes import make_run, trace_of

REVIEW = ["relevance_analysis"]


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    traces = {
        "q1": ["perform_comparison", "enable_search", *REVIEW * 2, "locate_evidence"],
        "q2": ["perform_comparison"],
        "q3": ["perform_comparison", *REVIEW * 10],
        "q4": None,  # no trace file
    }
    make_run(tmp_path, "s1", mode="full", answers={"q1": "A", "q2": "B", "q3": "C", "q4": "D"}, traces=traces)
    make_run(
        tmp_path,
        "s2",
        benchmark="b2",
        mode="full",
        answers={"q1": "A"},
        traces={"q1": ["perform_comparison"]},
    )
    make_run(tmp_path, "s2-untraced", benchmark="b2", mode="no_tools", answers={"q1": "A"})
    make_run(tmp_path, "sa", mode="standalone", answers={"q1": "A"})
    return tmp_path


def test_tool_calls_skip_answers_and_observations() -> None:
    p = Prediction(id="x", benchmark="b", answer="A", trace=trace_of(["enable_search", "enable_search"]))
    assert tool_calls(p) == {"enable_search": 2}


def test_llm_calls_from_usage_or_trace() -> None:
    assert llm_calls(Prediction(id="x", benchmark="b", answer="A", usage={"llm_calls": 7})) == 7
    # Standalone: one answer step that reports its prompt tokens.
    standalone = [{"step": 0, "kind": "final_answer", "prompt_tokens": 10, "completion_tokens": 1}]
    assert llm_calls(Prediction(id="x", benchmark="b", answer="A", trace=standalone)) == 1
    # Agent trace: the model turn, plus the tools' own calls.
    assert llm_calls(Prediction(id="x", benchmark="b", answer="A", trace=trace_of(["a", "b"]))) == 3
    assert llm_calls(Prediction(id="x", benchmark="b", answer="A")) is None


def test_bins() -> None:
    assert [bin_of(k) for k in (0, 1, 8, 9, 30)] == [None, "1", "8", ">8", ">8"]


def test_mean_calls_per_tool(runs_root: Path) -> None:
    runs, _ = load_runs([str(runs_root / "*")])
    t = tool_usage_table(runs, ["full", "no_tools"])
    mean = {(r["benchmark"], r["tool"]): r["mean_calls"] for r in t.records}
    # b1: 3 traced questions (q4 has no trace file).
    assert mean[("b1", "perform_comparison")] == 1.0
    assert mean[("b1", "enable_search")] == pytest.approx(1 / 3)
    assert mean[("b1", "relevance_analysis")] == pytest.approx(12 / 3)
    assert mean[("b1", "locate_evidence")] == pytest.approx(1 / 3)
    assert mean[("b2", "relevance_analysis")] == 0.0
    assert {r["n"] for r in t.records if r["benchmark"] == "b1"} == {3}
    # The paper's order; generate_options (never called) is left out.
    assert t.columns == [
        "run",
        "n",
        "perform_comparison",
        "enable_search",
        "relevance_analysis",
        "locate_evidence",
        "refused/q",
        "no-op/q",
    ]
    assert any("1 of 4 traces missing" in n for n in t.notes)
    assert any("s2-untraced" in n and "no traces" in n for n in t.notes)


def test_call_count_distribution(runs_root: Path) -> None:
    runs, _ = load_runs([str(runs_root / "*")])
    t = tool_distribution_table(runs, ["full"])
    rec = {(r["benchmark"], r["tool"]): r for r in t.records}
    ra = rec[("b1", "relevance_analysis")]
    assert (ra["questions"], ra["zero"], ra["n_2"], ra["n_>8"]) == (3, 1, 1, 1)
    assert ra["share_2"] == 0.5 and ra["share_>8"] == 0.5 and ra["share_1"] == 0.0
    le = rec[("b1", "locate_evidence")]
    assert (le["zero"], le["n_1"], le["share_1"]) == (2, 1, 1.0)
    total = rec[("b1", "all tools")]  # 5, 1 and 11 calls
    assert (total["n_5"], total["n_1"], total["n_>8"], total["zero"]) == (1, 1, 1, 0)
    assert rec[("b2", "relevance_analysis")]["share_1"] == 0.0  # never called: no shares
    assert t.cells[0][:6] == ["b1", "relevance_analysis", "3", "1", "0", "1"]


def test_no_traced_run_is_a_note(runs_root: Path) -> None:
    runs, _ = load_runs([str(runs_root / "sa")])
    t = tool_usage_table(runs, ["standalone"])
    assert t.records == [] and any("no traces" in n for n in t.notes)
    assert "_No data._" in t.to_markdown()


def test_only_calls_that_did_work_are_counted() -> None:
    from medagent.report.usage import tool_calls
    from medagent.types import Prediction

    steps = [
        {"kind": "tool", "tool": "enable_search", "executed": True, "ok": True},
        {"kind": "tool", "tool": "enable_search", "executed": False},  # a repeat, not run
        {
            "kind": "tool",
            "tool": "relevance_analysis",
            "executed": True,
            "ok": False,
        },  # ToolError: nothing to review
        {"kind": "tool", "tool": "locate_evidence"},  # a trace from before the fields: it worked
        {"kind": "tool", "tool": "final_answer", "executed": False},
    ]
    pred = Prediction(id="q", benchmark="b", answer="A", trace=steps)
    assert tool_calls(pred) == {"enable_search": 1, "locate_evidence": 1}
    assert tool_calls(pred, "refused") == {"enable_search": 1}
    assert tool_calls(pred, "no_op") == {"relevance_analysis": 1}


def test_the_cost_by_call_rows_are_per_question_and_keep_unreported_figures_none() -> None:
    from medagent.llm.base import Usage
    from medagent.llm.usage import UsageRecord
    from medagent.report.table import NA
    from medagent.report.usage import call_kind_rows, cost_by_call_cells

    usages = []
    for _ in range(2):
        u = UsageRecord.calls(by_tag=True)
        u.add(
            Usage(1000, 80, cached_tokens=900, evaluated_tokens=100, prompt_ms=500.0, decode_ms=4000.0),
            4.6,
            "qa_agent",
        )
        u.add(Usage(200, 100), 3.0, "perform_comparison")
        usages.append(u)
    rows = {r["kind"]: r for r in call_kind_rows(usages)}
    assert set(rows) == {"qa_agent", "perform_comparison", "all"}
    agent, compare, total = rows["qa_agent"], rows["perform_comparison"], rows["all"]
    assert (agent["calls"], agent["sent"], agent["evaluated"], agent["decoded"]) == (1, 1000, 100, 80)
    assert agent["hit_rate"] == 0.9 and agent["decode_s"] == 4.0
    assert compare["evaluated"] is None and compare["hit_rate"] is None
    assert (total["sent"], total["decoded"], total["llm_s"]) == (1200, 180, 7.6)
    assert cost_by_call_cells(compare)[2] == NA
