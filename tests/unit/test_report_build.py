"""The whole report: files written (markdown, CSVs, PNGs), notes for missing pieces, and the hydra pipeline."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from medagent.eval import OpenScorer
from medagent.report import ReportOptions, build_report
from pipelines.report import ReportConfig, register_configs
from pipelines.report import run as run_report
from tests.unit._report_fakes import ConstantPairScorer, TableEmbedder, make_run

CONF = Path(__file__).resolve().parents[2] / "conf"
PNG = b"\x89PNG\r\n\x1a\n"
ALL = {"q1": "A", "q2": "B", "q3": "C", "q4": "D"}
TRACES = {"q1": ["perform_comparison", "enable_search", "relevance_analysis"], "q2": ["perform_comparison"]}
register_configs()


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for bench in ("b1", "b2"):
        make_run(root, f"{bench}-sa", benchmark=bench, mode="standalone", answers={**ALL, "q4": "A"})
        for top_r, answers in ((4, {**ALL, "q2": "A"}), (32, ALL)):
            make_run(root, f"{bench}-full{top_r}", benchmark=bench, mode="full", top_r=top_r,
                     answers=answers, traces=TRACES)  # fmt: skip
        make_run(root, f"{bench}-nocp", benchmark=bench, mode="no_cache_prune", answers={**ALL, "q1": "B"})
    make_run(root, "b1-open", mode="full", open_ended=True, answers={"q1": "text-A"}, traces=TRACES)
    return root


def _scorer() -> OpenScorer:
    return OpenScorer(
        {"fake": TableEmbedder({"text-A": [1.0, 0.0]})}, ConstantPairScorer(0.9), "fake-bert", 1
    )


def test_full_report_writes_tables_and_figures(sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    report = build_report([str(sweep / "*")], out, ReportOptions(bootstrap_samples=100), _scorer)
    for name in ("fig2a_tool_calls", "fig2b_tool_call_distribution", "fig3_top_r"):
        png = out / f"{name}.png"
        assert png.read_bytes()[:8] == PNG and png.stat().st_size > 5000
    for name in (
        "table1_mc_accuracy",
        "table2_open_ended",
        "table3_ablations",
        "flips",
        "cost_latency",
        "runs",
    ):
        assert (out / f"{name}.csv").exists()
    with open(out / "table3_ablations.csv") as f:
        rows = list(csv.DictReader(f))
    assert {(r["benchmark"], r["mode"]) for r in rows} == {
        (b, m) for b in ("b1", "b2") for m in ("no_cache_prune", "standalone")}  # fmt: skip
    assert float(rows[0]["drop_points"]) == pytest.approx(0.25)
    md = (out / "report.md").read_text()
    assert "Table 1." in md and "Table 2." in md and "Table 3." in md
    assert "![Fig. 3. Accuracy vs TopR](fig3_top_r.png)" in md
    assert "no_tools" in md  # a missing ablation is named
    assert report.tables["table2_open_ended"].records[0]["mean"] == 1.0  # computed with the injected scorer
    fig3 = report.tables["fig3_top_r"].records
    assert [(r["benchmark"], r["top_r"], r["accuracy"]) for r in fig3] == [
        ("b1", 4, 0.75), ("b1", 32, 1.0), ("b2", 4, 0.75), ("b2", 32, 1.0)]  # fmt: skip
    flips = report.tables["flips"].records
    assert [(r["benchmark"], r["right_to_wrong"], r["wrong_to_right"]) for r in flips] == [
        ("b1", 0, 1),
        ("b2", 0, 1),
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["runs"]) == 9 and summary["figures"]["fig2a"].endswith("fig2a_tool_calls.png")


def test_missing_pieces_are_notes_not_crashes(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make_run(root, "full", mode="full", answers=ALL)  # no traces, no standalone, one TopR
    out = tmp_path / "report"
    report = build_report([str(root / "*"), str(tmp_path / "nothing-here")], out, ReportOptions())
    assert report.figures == {
        "fig2a": None, "fig2b": None, "fig3": out / "fig3_top_r.png", "gate_pareto": None,
    }  # fmt: skip
    md = report.markdown
    assert "matched no run directory" in md
    assert "_Not drawn: no traced run._" in md
    assert "no traces; left out of the tool-usage figures" in md
    assert "one TopR value only" in md
    assert "b1 / fake-llm: no standalone run; flip rates not computed" in md
    assert not (out / "fig2a_tool_calls.png").exists()
    # Nothing at all: still a report.
    empty = build_report([str(tmp_path / "none")], tmp_path / "empty", ReportOptions())
    assert empty.runs == [] and "Report over 0 run(s)" in empty.markdown


def _compose(*overrides: str) -> ReportConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="report", overrides=list(overrides))
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def test_pipeline_composes_and_writes(
    sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _compose(
        f"runs=[{sweep}/b1-*,{sweep}/b2-sa]",
        f"out={tmp_path / 'out'}",
        "report.compute_open_ended=false",
        "report.bootstrap_samples=50",
    )
    assert isinstance(cfg, ReportConfig) and cfg.open_scoring.bertscore_num_layers == 8
    assert cfg.runs == [f"{sweep}/b1-*", f"{sweep}/b2-sa"]
    result = run_report(cfg)
    printed = capsys.readouterr().out
    assert "Table 1. Multiple-choice accuracy" in printed and "Flips from standalone to full" in printed
    assert result["out"] == str((tmp_path / "out").resolve()) and len(result["runs"]) == 6
    assert (tmp_path / "out" / "report.md").exists() and (tmp_path / "out" / "manifest.json").exists()
    # Open-ended scoring off: the open-ended run is named, nothing is loaded.
    assert "scoring is off" in (tmp_path / "out" / "report.md").read_text()
    assert _compose("runs=[x]", "scoring=gpu").open_scoring.bertscore_num_layers == 40
    # One folder instead of a list: searched for runs.
    one = _compose(
        f"runs={sweep}", f"out={tmp_path / 'one'}", "report.compute_open_ended=false", "print_tables=false"
    )
    assert one.runs == str(sweep) and len(run_report(one)["runs"]) == 9
