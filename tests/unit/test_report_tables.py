"""Report tables from synthetic run directories: Table 1-3, the TopR sweep, cost, flips, loading notes."""

from __future__ import annotations

from pathlib import Path

import pytest

from medagent.eval import OpenScorer
from medagent.report.loader import load_runs, select_cells
from medagent.report.tables import (
    cost_table,
    flip_table,
    mc_metrics,
    open_ended_metrics,
    table1,
    table2,
    table3,
    top_r_table,
)
from tests.unit._report_fakes import ConstantPairScorer, TableEmbedder, make_run

ALL = {"q1": "A", "q2": "B", "q3": "C", "q4": "D"}


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    # standalone: q1, q3 right; q2 wrong; q4 INVALID; q5 right (q5 only here) -> 3/5
    make_run(
        tmp_path,
        "sa",
        mode="standalone",
        answers={"q1": "A", "q2": "A", "q3": "C", "q4": "INVALID", "q5": "E"},
    )
    # A smaller duplicate of the same experiment: left out with a note.
    make_run(tmp_path, "sa-old", mode="standalone", answers={"q1": "B"})
    # full at TopR 32: q1, q2, q4 right, q3 wrong -> 3/4; at TopR 8: 1/4
    make_run(tmp_path, "full32", mode="full", top_r=32, answers={**ALL, "q3": "A"}, usage={
        "prompt_tokens": 300, "completion_tokens": 30, "llm_calls": 4, "tool_calls": 5})  # fmt: skip
    make_run(tmp_path, "full8", mode="full", top_r=8, answers={"q1": "A", "q2": "A", "q3": "A", "q4": "A"})
    make_run(tmp_path, "notools", mode="no_tools", answers={**ALL, "q3": "A", "q4": "A"})  # 2/4
    make_run(tmp_path, "nosearch", mode="no_search", answers=ALL, errors=["q2", "q3", "q4"])  # 1/4
    # A second benchmark with an ablation but no full run, and no standalone.
    make_run(tmp_path, "b2-notools", benchmark="b2", mode="no_tools", answers={"q1": "A"})
    (tmp_path / "not-a-run").mkdir()
    # An index (or report) folder has a manifest too, but no benchmark config: not a run, not a note.
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "manifest.json").write_text('{"config": {"embedder": {}}}')
    # A benchmark run that has not written a prediction yet.
    started = make_run(tmp_path, "started", mode="no_search", answers={})
    (started / "predictions.jsonl").unlink()
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "predictions.jsonl").write_text('{"id": "q1", "benchmark": "b1", "answer": "A"}\n')
    return tmp_path


def test_loading_dedup_and_selection(runs_root: Path) -> None:
    runs, notes = load_runs([str(runs_root / "*"), str(runs_root / "missing-*")])
    names = sorted(r.path.name for r in runs)
    assert names == ["b2-notools", "full32", "full8", "nosearch", "notools", "sa"]
    assert any("sa-old" in n and "same experiment" in n for n in notes)
    assert any("bare" in n and "identify" in n for n in notes)
    assert any("missing-*" in n and "matched no run" in n for n in notes)
    assert any("started" in n and "no predictions yet" in n for n in notes)
    assert not any("index" in n or "not-a-run" in n for n in notes)
    selected, sel_notes = select_cells(runs, main_top_r=32)
    assert sorted(r.path.name for r in selected) == ["b2-notools", "full32", "nosearch", "notools", "sa"]
    assert sel_notes == []
    # Without a run at the main TopR, the larger run is chosen and the choice is noted.
    selected, sel_notes = select_cells(runs, main_top_r=16)
    assert "full32" in {r.path.name for r in selected} and "top_r=16" in sel_notes[0]
    # A parent folder is searched for runs.
    again, _ = load_runs([str(runs_root)])
    assert len(again) == len(runs)


def _tables(runs_root: Path):  # type: ignore[no-untyped-def]
    runs, _ = load_runs([str(runs_root / "*")])
    selected, _ = select_cells(runs, 32)
    acc = mc_metrics(runs, bootstrap_samples=200)
    return runs, selected, acc


def test_table1_accuracy_and_ci(runs_root: Path) -> None:
    _, selected, acc = _tables(runs_root)
    t = table1(selected, acc)
    by = {(r["benchmark"], r["mode"]): r for r in t.records}
    assert by[("b1", "standalone")]["accuracy"] == pytest.approx(3 / 5)
    assert by[("b1", "standalone")]["invalid_rate"] == pytest.approx(1 / 5)
    assert by[("b1", "full")]["accuracy"] == 0.75 and by[("b1", "full")]["top_r"] == 32
    assert by[("b1", "no_search")]["error_rate"] == 0.75
    lo, hi = by[("b1", "full")]["ci95"]
    assert 0 <= lo <= 0.75 <= hi <= 1
    row = next(c for c in t.cells if c[2] == "full")
    assert row[5] == "75.00" and row[3] == "32"
    assert "| benchmark | llm | mode |" in t.to_markdown()


def test_table3_drops_in_accuracy_points_and_notes(runs_root: Path) -> None:
    # The paper's Table 3 is full - ablation in accuracy points (1.07 = 82.98 - 81.91), not a relative drop.
    _, selected, acc = _tables(runs_root)
    t = table3(selected, acc)
    drops = {r["mode"]: r["drop_points"] for r in t.records}
    assert drops["no_tools"] == pytest.approx(0.75 - 0.5)
    assert drops["no_search"] == pytest.approx(0.75 - 0.25)
    assert drops["standalone"] == pytest.approx(0.75 - 0.6)
    assert "no_cache_prune" not in drops
    assert t.cells[0][:3] == ["b1", "fake-llm", "75.00"] and t.cells[0][3] == "50.00 (-25.00)"
    assert t.cells[0][4] == "—"
    assert any("no_cache_prune" in n for n in t.notes)
    assert any(n.startswith("b2 / fake-llm: no full run") for n in t.notes)


def test_top_r_sweep(runs_root: Path) -> None:
    runs, _, acc = _tables(runs_root)
    t = top_r_table(runs, acc)
    assert [(r["top_r"], r["accuracy"]) for r in t.records] == [(8, 0.25), (32, 0.75)]
    assert t.notes == []


def test_flip_rates_on_common_ids(runs_root: Path) -> None:
    _, selected, _ = _tables(runs_root)
    t = flip_table(selected)
    (rec,) = t.records
    # standalone right on q1, q3 (q5 is not in the full run); full right on q1, q2, q4.
    assert rec["n_common"] == 4 and rec["baseline_correct"] == 2 and rec["treatment_correct"] == 3
    assert rec["right_to_wrong"] == 1 and rec["wrong_to_right"] == 2
    assert rec["right_to_wrong_rate"] == 0.25 and rec["wrong_to_right_rate"] == 0.5
    assert rec["right_to_wrong_given_right"] == 0.5 and rec["wrong_to_right_given_wrong"] == 1.0
    assert t.cells[0][5] == "1 (25.0%)"
    # b2 has neither mode: nothing to say; a benchmark with only one of them gets a note.
    assert t.notes == []
    only_full = [r for r in selected if r.key.mode != "standalone"]
    t2 = flip_table(only_full)
    assert t2.records == [] and "no standalone run" in t2.notes[0]


def test_cost_and_latency(runs_root: Path) -> None:
    runs, _, _ = _tables(runs_root)
    t = cost_table(runs)
    by = {r["run_dir"].split("/")[-1]: r for r in t.records}
    assert by["full32"]["prompt_tokens"] == 300 and by["full32"]["llm_calls"] == 4
    assert by["full32"]["tool_calls"] == 5 and by["full32"]["latency_s"] == 2.0
    assert by["full32"]["total_latency_s"] == 8.0
    # No llm_calls in usage and no traces: unknown, not zero.
    assert by["sa"]["llm_calls"] is None and by["sa"]["tool_calls"] == 0
    assert by["nosearch"]["errors"] == 3


def test_open_ended_table_stored_and_computed(tmp_path: Path) -> None:
    stored = {"open_ended": {"n": 2, "invalid": 0, "errors": 0, "invalid_rate": 0.0, "error_rate": 0.0,
                             "metrics": {"cosine/SFR": {"mean": 0.8, "sd": 0.1, "ci95": [0.7, 0.9]}}}}  # fmt: skip
    make_run(
        tmp_path, "b2-open", benchmark="b2", mode="full", open_ended=True, answers={"q1": "x"}, metrics=stored
    )
    make_run(tmp_path, "b1-open", mode="full", open_ended=True, answers={"q1": "text-A", "q2": "INVALID"})
    runs, _ = load_runs([str(tmp_path / "*")])
    calls: list[int] = []

    def factory() -> OpenScorer:
        calls.append(1)
        emb = TableEmbedder({"text-A": [1, 0], "text-B": [0, 1]})
        return OpenScorer({"fake": emb}, ConstantPairScorer(0.5), "fake-bert", 3)

    metrics, notes = open_ended_metrics(runs, factory, bootstrap_samples=100)
    assert calls == [1] and notes == []
    by = {p.name: m for p, m in metrics.items()}
    assert by["b2-open"]["source"] == "metrics.json"
    assert by["b1-open"]["source"] == "computed"
    assert by["b1-open"]["metrics"]["cosine/fake"]["mean"] == 0.5  # (1 + 0) / 2: INVALID scores 0
    t = table2(runs, metrics)
    assert t.columns[4:7] == ["cosine/fake", "bertscore_f1", "cosine/SFR"]
    row_b2 = next(c for c in t.cells if c[0] == "b2")
    assert row_b2[4] == "—" and row_b2[6] == "0.800 ± 0.100"
    assert {(r["benchmark"], r["metric"]) for r in t.records} == {
        ("b1", "cosine/fake"), ("b1", "bertscore_f1"), ("b2", "cosine/SFR")}  # fmt: skip
    # Scoring off: the run that needs it is named in a note.
    _, notes = open_ended_metrics(runs, None)
    assert len(notes) == 1 and "b1-open" in notes[0]


def test_top_r_sweep_as_a_ratio_to_a_reference(runs_root: Path, tmp_path: Path) -> None:
    # The paper's Fig. 3 is accuracy / GPT-4 - 1 (Step 2: 86.24 / 81.67 - 1 = +5.60 %), not points.
    from medagent.report.figures import fig3

    runs, _, acc = _tables(runs_root)
    t = top_r_table(runs, acc, reference={"b1": 0.5}, reference_name="GPT-4")
    assert [r["vs_reference"] for r in t.records] == [
        pytest.approx(0.25 / 0.5 - 1),
        pytest.approx(0.75 / 0.5 - 1),
    ]
    assert all(r["vs_reference_lo"] == pytest.approx(r["ci95_lo"] / 0.5 - 1) for r in t.records)
    assert t.cells[1][-2] == "+50.00" and t.columns[-2] == "÷ GPT-4 − 1"
    assert fig3(t, tmp_path / "fig3.png") is not None
    # Without a reference for the benchmark: absolute accuracy only.
    assert all(r["vs_reference"] is None for r in top_r_table(runs, acc, reference={}).records)
