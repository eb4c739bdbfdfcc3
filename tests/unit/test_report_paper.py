"""The report beside the paper: published values, Δ, in-CI flags, Table 3 in points, Fig. 3 as a ratio to
GPT-4, exact McNemar with Holm, and the lab's stored answers compared item by item."""

from __future__ import annotations

from pathlib import Path

import pytest

from medagent.data import resolve_data_root
from medagent.report.build import ReportOptions, build_report
from medagent.report.paper import holm, mcnemar_exact, paired
from medagent.report.published import load_published, paper_benchmark
from tests.unit._paper_fakes import write_paper_runs


def test_published_values_follow_the_papers_conventions() -> None:
    pub = load_published()
    # Table 1 accuracies resolve to counts over the paper's items.
    assert pub.accuracy("agent", "usmle_step1_paper") == pytest.approx(78 / 94, abs=5e-5)
    assert pub.accuracy("agent", "usmle_step2") == pytest.approx(94 / 109, abs=5e-5)
    assert pub.accuracy("agent", "usmle_step3") == pytest.approx(108 / 122, abs=5e-5)
    # Table 3 in points: 1.07 = 82.98 - 81.91 (77/94).
    assert pub.drop("no_tools", "usmle_step1") == pytest.approx(78 / 94 - 77 / 94, abs=1e-4)
    # Fig. 3 as a ratio: 86.24 / 81.67 - 1 = +5.60 %.
    gpt4 = pub.accuracy("gpt-4", "usmle_step2")
    assert gpt4 is not None
    assert pub.ratio("usmle_step2", 32) == pytest.approx(0.8624 / gpt4 - 1, abs=5e-5)
    assert pub.ratio("usmle_step2", 16) is None and paper_benchmark("medqa_paper") == "medqa"


def test_mcnemar_exact_and_holm() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 * 0.5**6)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    res = paired({"a": 1, "b": 0, "c": 0}, {"a": 1, "b": 1, "c": 0, "d": 1})
    assert res is not None and (res.n, res.b, res.c) == (3, 0, 1) and res.diff == pytest.approx(1 / 3)
    assert paired({"a": 1}, {"b": 1}) is None


def test_report_beside_the_paper_on_the_papers_items(tmp_path: Path) -> None:
    try:
        root = resolve_data_root(None)
    except FileNotFoundError as exc:
        pytest.skip(f"shared data not available: {exc}")
    if not (root / "usmle_paper").is_dir():
        pytest.skip("usmle_paper/ is not in this data root")
    write_paper_runs(tmp_path / "runs", root)
    report = build_report(
        [str(tmp_path / "runs")], tmp_path / "report", ReportOptions(compute_open_ended=False)
    )
    t1 = {r["benchmark"]: r for r in report.tables["table1_vs_paper"].records}
    assert (
        t1["usmle_step1_paper"]["accuracy"] == 78 / 94 and t1["usmle_step1_paper"]["published_in_ci"] == "yes"
    )
    assert abs(t1["usmle_step1_paper"]["delta"]) < 1e-4
    assert t1["usmle_step1_paper"]["lab_bare_72b"] == pytest.approx(0.7872)  # the second reference
    t3 = {(r["benchmark"], r["ablation"]): r for r in report.tables["table3_vs_paper"].records}
    step1 = t3[("usmle_step1_paper", "no_tools")]
    assert step1["difference"] == pytest.approx(1 / 94) and step1["published"] == pytest.approx(0.0107)
    assert report.tables["table3_ablations"].cells[0][3] == "81.91 (-1.06)"  # points, not a relative drop
    f3 = {(r["benchmark"], r["top_r"]): r for r in report.tables["fig3_vs_paper"].records}
    assert f3[("usmle_step2_paper", 32)]["ratio"] == pytest.approx((94 / 109) / 0.8167 - 1)
    assert f3[("usmle_step2_paper", 32)]["published"] == pytest.approx(0.056)
    tests = report.tables["paired_tests"].records
    assert len(tests) == 12 and all(r["p_holm"] >= r["p"] for r in tests)
    lab = report.tables["lab_reference"].records
    same = next(r for r in lab if r["mode"] == "standalone" and r["lab_model"] == "72B"
                and r["benchmark"] == "usmle_step1_paper")  # fmt: skip
    assert (same["b"], same["c"], same["lab_accuracy"]) == (0, 0, 74 / 94)  # built from the lab's answers
    assert {r["n"] for r in lab if r["lab_model"] == "1.5B" and r["benchmark"] == "usmle_step1_paper"} == {92}
    assert all(r["departures"] for r in report.tables["departures"].records)
    md = report.markdown
    assert "Table 3 beside the paper" in md and "÷ GPT-4 − 1" in md and "| published |" in md


def test_held_out_evidence_is_its_own_arm_compared_with_both_neighbours(tmp_path: Path) -> None:
    import json
    from dataclasses import asdict

    from medagent.config import BenchmarkConfig, LLMConfig, RunConfig
    from medagent.report.loader import load_runs
    from medagent.report.paper import paired_tests
    from medagent.run import RunDir
    from medagent.types import Gold, Prediction
    from tests.configs import agent_config

    golds = [Gold(id=f"pubmedqa-{i}", answer="A") for i in range(10)]
    right = {"standalone": 5, "full": 9, "full_held": 6}
    for arm, k in right.items():
        agent = agent_config(mode=arm.removesuffix("_held"))
        agent.retrieval.hold_out_own_evidence = arm.endswith("_held")
        cfg = RunConfig(benchmark=BenchmarkConfig(name="pubmedqa", loader="pubmedqa"), agent=agent,
                        llm=LLMConfig(name="m"))  # fmt: skip
        rd = RunDir(tmp_path / arm)
        rd.write_json(rd.manifest, {"config": json.loads(json.dumps(asdict(cfg), default=str))})
        rd.write_golds(golds)
        rd.append_predictions(Prediction(id=g.id, benchmark="pubmedqa", answer="A" if n < k else "B")
                              for n, g in enumerate(golds))  # fmt: skip
    runs, notes = load_runs([str(tmp_path)])
    assert sorted(r.key.mode for r in runs) == ["full", "full/held_out", "standalone"] and not notes
    table, found = paired_tests(runs)
    got = {(base, treat): p.diff for (_, _, base, treat), p in found.items()}
    assert got == pytest.approx({("standalone", "full"): 0.4, ("standalone", "full/held_out"): 0.1,
                                 ("full/held_out", "full"): 0.3})  # fmt: skip
    assert "Holm over 3 comparisons" in table.notes
