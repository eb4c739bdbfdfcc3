"""Every script under benchmarks/ imports: a helper one of them borrows from another cannot move or be
renamed without this failing (each script's work runs only under ``__main__``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_every_benchmark_script_imports() -> None:
    names = sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if p.stem != "__init__")
    assert len(names) >= 10
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module(f'benchmarks.{n}')\n"
    # A fresh interpreter: importing the scripts must not depend on what other tests imported first.
    done = subprocess.run(
        [sys.executable, "-c", code, *names], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_replayed_agent_opening_renders_the_agents_real_prompt() -> None:
    # bench_llamacpp_settings and bench_prefix_router replay it: a variable the prompt gained since must
    # reach it, or both fail only when run.
    from benchmarks.bench_llamacpp_settings import opening
    from medagent.types import Question

    messages = opening(Question("q1", "Which drug?", {"A": "aspirin", "B": "heparin"}, "medqa"))
    assert messages[0]["role"] == "system" and "Which drug?" in messages[-1]["content"]
    assert "Only quoted evidence is kept in memory" in messages[0]["content"]  # full's bank: cache_prune


def test_the_cost_benchmarks_ledger_resumes_and_sums_its_stretches(tmp_path: Path, monkeypatch: Any) -> None:
    from benchmarks import bench_agent_cost as bench

    ticks = iter([0.0, 10.0, 25.0, 100.0, 104.0])  # a stretch: start, two items; a second: start, one item
    monkeypatch.setattr(bench.Ledger, "clock", staticmethod(lambda: next(ticks, 0.0)))
    first = bench._ledger(tmp_path, "qa", "new", {"llm": ["a"]})
    first.add("q1", {"answer": "A"})
    first.add("q2", {"answer": "B"})
    again = bench._ledger(tmp_path, "qa", "new", {"llm": ["a"]})
    assert set(again.rows) == {"q1", "q2"} and again.wall_s == 25.0  # the first stretch up to its last item
    again.add("q3", {"answer": "C"})
    assert again.wall_s == 29.0
    assert set(bench.Ledger(tmp_path / "qa-new.jsonl").rows) == {"q1", "q2", "q3"}
    with pytest.raises(SystemExit, match="another --run-dir"):
        bench._ledger(tmp_path, "qa", "new", {"llm": ["b"]})
    assert bench._ledger(None, "qa", "new", {}).rows == {}


def test_the_router_benchmarks_tool_results_have_the_asked_length() -> None:
    from benchmarks.bench_prefix_router import _observation
    from medagent.types import Question

    qs = [Question(f"q{i}", f"Question {i} text.", {"A": "x"}, "medqa") for i in range(3)]
    text = _observation(qs, 2, 100)
    assert len(text) == 100 and text.startswith("Question 2 text.\n\nQuestion 0 text.")


def test_the_router_benchmark_reads_each_llm_replicas_counters() -> None:
    from benchmarks.bench_prefix_router import per_replica

    page = "\n".join([
        "# HELP ray_serve_deployment_request_counter_total The number of queries",
        'ray_serve_deployment_request_counter_total{application="llm",deployment="LLMServer:m",replica="r1",route="/"} 7.0',
        'ray_serve_deployment_request_counter_total{application="llm",deployment="LLMServer:m",replica="r2",route="/"} 3.0',
        'ray_serve_deployment_request_counter_total{application="llm",deployment="OpenAiIngress",replica="i1",route="/"} 10.0',
        'ray_vllm_prefix_cache_queries_total{ReplicaId="r1",model_name="m"} 1000.0',
        'ray_vllm_prefix_cache_hits_total{ReplicaId="r1",model_name="m"} 600.0',
        'ray_vllm_prefix_cache_hits_total{ReplicaId="r1",model_name="m2"} 100.0',
        'ray_other_total{replica="r1"} 5.0',
    ])  # fmt: skip
    assert per_replica(page) == {
        "r1": {"requests": 7.0, "queried": 1000.0, "hits": 700.0},
        "r2": {"requests": 3.0},
    }
