"""The suite command on the local cluster: a worker killed mid-suite costs nothing and duplicates nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hydra import initialize_config_dir

from medagent.config import ClusterConfig
from pipelines.run_suite import Cell, plan_from_overrides, run_suite
from tests.integration.conftest import clear_serve_apps

pytestmark = pytest.mark.integration

CONF = Path(__file__).resolve().parents[2] / "conf"
N = 3
# A test-only experiment, found through hydra's search path (nothing test-only lives in conf/): the two
# cheapest cells, 2 benchmarks x the standalone agent.
EXPERIMENT = """# @package _global_
defaults:
  - override /agent: standalone
hydra:
  sweeper:
    params:
      benchmark: medqa,usmle_step1
      agent: standalone
run_dir: ${outputs_root}/experiments/suite_fault/${llm.name}/${benchmark.name}-${agent.mode}
"""


def _plan(tmp: Path, data_root: Path, cluster: ClusterConfig, *extra: str) -> tuple[Any, list[Cell]]:
    (tmp / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
    (tmp / "conf" / "experiment" / "suite_fault.yaml").write_text(EXPERIMENT)
    overrides = [f"hydra.searchpath=[file://{tmp / 'conf'}]", "experiment=suite_fault", "llm=smollm2-135m-cpu",
                 f"limit={N}", f"outputs_root={tmp / 'outputs'}", f"data_root={data_root}", "progress=false",
                 "show_example=false", "bootstrap_samples=200", "suite.print_report=false", *extra]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        suite, cells = plan_from_overrides(overrides)
    for c in cells:
        c.cfg.cluster = cluster  # the session's cluster (free HTTP port, batches of 2 -> 2 batches per cell)
    return suite, cells


def _ids(cell: Cell) -> list[str]:
    lines = Path(str(cell.cfg.run_dir), "predictions.jsonl").read_text().splitlines()
    return [json.loads(line)["id"] for line in lines]


def test_a_worker_killed_mid_suite_costs_nothing_and_a_rerun_answers_nothing(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path: Path, data_root: Path
) -> None:
    clear_serve_apps()  # free the CPUs other tests' applications hold
    # Each cell's AgentWorker dies once after its first batch, before returning it (a killed worker
    # process): Ray restarts it and retries the batch; the run dir de-duplicates by question id.
    kill = f"kill_worker_once_file={tmp_path}/killed-${{benchmark.name}}"
    suite, cells = _plan(tmp_path, data_root, cluster_cfg, kill)
    assert [c.cfg.benchmark.name for c in cells] == ["medqa", "usmle_step1"]
    summary = run_suite(suite.suite, cells)

    assert (tmp_path / "killed-medqa").exists() and (tmp_path / "killed-usmle_step1").exists(), (
        "no worker died"
    )
    for cell in cells:
        ids = _ids(cell)
        assert len(ids) == N == len(set(ids)), (cell.label, ids)
        assert cell.status == "done" and cell.predictions == cell.answered == N
    out = Path(summary["suite_dir"])
    assert out == tmp_path / "outputs/experiments/suite_fault/smollm2-135m-cpu"
    assert (out / "report" / "report.md").exists()
    assert json.loads((out / "suite.json").read_text())["report"] == str(out / "report" / "report.md")

    # Rerun (no kill): every cell is complete, nothing is answered again.
    before = [Path(str(c.cfg.run_dir), "predictions.jsonl").read_bytes() for c in cells]
    suite, cells = _plan(tmp_path, data_root, cluster_cfg)
    again = run_suite(suite.suite, cells)
    assert [c["status"] for c in again["cells"]] == ["skipped", "skipped"]
    assert [Path(str(c.cfg.run_dir), "predictions.jsonl").read_bytes() for c in cells] == before

    # A driver killed mid-cell: the second cell kept 1 answer and was never scored. The rerun skips the
    # first cell and answers the 2 missing questions of the second.
    second = Path(str(cells[1].cfg.run_dir), "predictions.jsonl")
    second.write_text(second.read_text().splitlines()[0] + "\n")
    suite, cells = _plan(tmp_path, data_root, cluster_cfg)
    resumed = run_suite(suite.suite, cells)
    assert [(c["status"], c["answered"]) for c in resumed["cells"]] == [("skipped", 0), ("done", N - 1)]
    for cell in cells:
        ids = _ids(cell)
        assert len(ids) == N == len(set(ids))
