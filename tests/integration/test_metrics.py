"""Our custom metrics reach the Prometheus endpoint of the local cluster after a small real run.

SmolLM2 (fast, answers at chance) plays every model: the full agent on two MedQA questions with
schema-constrained tool calls (each turn is a call, so tool, LLM and memory-bank metrics appear), one
search through the serving app's Retriever (the model may not search), and one tiny interview through
``InterviewWorker`` on Ray Data (skipped: see ``TRANSCRIPT``). The endpoint is polled until every metric
shows up (Ray exports every few seconds).
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from actors.metrics import SPECS
from medagent.agent.tools import SPECS as TOOL_SPECS
from medagent.config import (
    BenchmarkConfig,
    ClusterConfig,
    InterviewEvalConfig,
    RetrieverConfig,
    RunConfig,
)
from pipelines.benchmark_run import run
from tests.configs import agent_config, history_agent_config
from tests.integration.conftest import clear_serve_apps
from tests.integration.test_qa_agent import RERANKER
from tests.integration.test_qa_agent import SMOL as QA_SMOL

pytestmark = pytest.mark.integration

# The QA agent tests' small models; each agent turn decoded under the one-call schema.
SMOL = replace(QA_SMOL, tool_calls="json_schema")
# A benchmark name no other test uses, so the counters of this run are told apart from the session's.
BENCHMARK = BenchmarkConfig(name="medqa_metrics_test", loader="medqa")
# Ends on the doctor's question: no closing statement to score against, so the worker skips it before
# any LLM call (a real single-shot interview with SmolLM2 took ~3 minutes here; LLM metrics come from the
# agent above, and tests/integration/test_run_interviews.py runs real interviews).
TRANSCRIPT = """D: Hello, what brings you in today?
P: I've had a cough and a fever for three days.
D: Any blood when you cough?
P: A little blood this morning.
"""


_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples by series name (``ray_medagent_..._total``, ``..._bucket``...) from the endpoint.

    Only our lines are parsed (name, labels, value): a strict parser of the whole page would make this
    test depend on every metric Ray itself exports.
    """
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for line in text.splitlines():
        if line.startswith("ray_medagent_"):
            name, _, rest = line.partition("{")
            labels, _, value = rest.rpartition("} ")
            out[name].append((dict(_LABEL.findall(labels)), float(value.split()[0])))
    return out


def _total(samples: list[tuple[dict[str, str], float]], **labels: str) -> float:
    return sum(v for lab, v in samples if all(lab.get(k) == x for k, x in labels.items()))


def _interview(ray: Any, cluster: ClusterConfig) -> dict[str, Any]:
    """One interview through ``InterviewWorker`` on Ray Data, as ``pipelines.run_interviews`` runs it."""
    from dataclasses import asdict

    from actors.builder import LLM_APP, LLM_DEPLOYMENT
    from actors.interview_worker import InterviewWorker
    from medagent.interview.transcripts import parse_transcript
    from medagent.llm.endpoints import HandleEndpoint

    agent = history_agent_config(mode="single_shot", max_tokens_summary=96, max_tokens_assessment=160)
    interview = parse_transcript(TRANSCRIPT, "metrics-T1")
    ds = ray.data.from_items([{"id": interview.id, "interview": interview.to_json()}]).map_batches(
        InterviewWorker,
        fn_constructor_kwargs={
            "agent": asdict(agent),
            "eval": asdict(InterviewEvalConfig(simulator_exchanges=None, red_flag_max_tokens=96)),
            "llm": asdict(SMOL),
            "llm_endpoint": HandleEndpoint(LLM_APP, LLM_DEPLOYMENT),  # where every run deploys the CPU LLM
        },
        compute=ray.data.ActorPoolStrategy(size=1),
        num_cpus=0.25,
        batch_size=1,
    )
    (row,) = ds.take_all()
    return json.loads(row["row"])  # type: ignore[no-any-return]


def test_a_small_run_exports_every_custom_metric(
    ray_cluster: Any, qa_index: Path, cluster_cfg: ClusterConfig, data_root: Path, tmp_path: Path
) -> None:
    from ray import serve

    from actors.builder import APP, RETRIEVER_DEPLOYMENT, retrieval_app_name

    port = cluster_cfg.ray.metrics_export_port
    assert port, "conftest's cluster_cfg sets metrics_export_port"
    clear_serve_apps()
    t0 = time.monotonic()
    cfg = RunConfig(
        benchmark=BENCHMARK,
        agent=agent_config(
            mode="full",
            max_tokens=64,
            top_k=2,
            top_r=4,
            batch_size=4,
            doc_max_chars=600,
            max_steps=2,
            step_max_tokens=160,
            tool_max_tokens=128,
        ),
        llm=SMOL,
        cluster=cluster_cfg,
        retriever=RetrieverConfig(top_k=2),
        reranker=RERANKER,
        index_dir=str(qa_index),
        run_dir=str(tmp_path / "full"),
        data_root=str(data_root),
        limit=2,
        progress=False,
        bootstrap_samples=20,
        show_example=False,
    )
    out = run(cfg)
    assert out["n"] == 2
    print(f"run: {time.monotonic() - t0:.0f}s")
    # SmolLM2 may answer without searching: one search through the serving app's Retriever makes sure
    # the replica records a latency (the agent's own searches take the same route).
    retriever = serve.get_deployment_handle(RETRIEVER_DEPLOYMENT, app_name=retrieval_app_name(APP))
    found = retriever.retrieve.remote({"query": "scurvy vitamin C", "top_k": 2}).result(timeout_s=60)
    assert found["results"]
    row = _interview(ray_cluster, cluster_cfg)
    assert row["interview_id"] == "metrics-T1" and row["skipped"], row
    print(f"interview: {time.monotonic() - t0:.0f}s")

    # Every spec's main series, e.g. ray_medagent_questions_total, ray_medagent_llm_latency_seconds_bucket.
    wanted = {spec.exported()[0] for spec in SPECS.values()}
    deadline = time.monotonic() + 90  # Ray exports every few seconds
    while True:
        series = _scrape(port)
        q = series.get("ray_medagent_questions_total", [])
        done = _total(q, benchmark=BENCHMARK.name, agent="full")
        # Each process exports on its own clock: the driver's question counter can arrive before a
        # worker's last observations, so wait for the worker-side counts the assertions below need too.
        worker_side = (
            _total(series.get("ray_medagent_memory_bank_size_count", []), agent="full") >= 1
            and _total(series.get("ray_medagent_llm_latency_seconds_count", []), model=SMOL.served_name) >= 1
            and _total(series.get("ray_medagent_retrieval_latency_seconds_count", [])) >= 1
            and _total(series.get("ray_medagent_interviews_total", []), mode="single_shot", status="skipped")
            == 1
        )
        if wanted <= set(series) and done == 2 and worker_side:
            break
        if time.monotonic() > deadline:
            assert wanted <= set(series), (
                f"missing {sorted(wanted - set(series))}; questions answered: {done}"
            )
            break  # the assertions below say which count fell short
        time.sleep(2)

    # The driver graded them as score() did: accuracy so far = correct / all.
    assert _total(q, benchmark=BENCHMARK.name, agent="full", status="correct") == out["correct"]
    tools = {lab["tool"] for lab, v in series["ray_medagent_tool_calls_total"] if v > 0}
    assert tools and tools <= set(TOOL_SPECS) | {"other"}
    tokens = series["ray_medagent_llm_tokens_total"]
    assert _total(tokens, kind="prompt") > 0 and _total(tokens, kind="completion") > 0
    # Worker-side series: present and counting, not exact counts. A worker process reports its metrics
    # every few seconds and Ray Data ends the pool when the run finishes, so observations from its last
    # seconds may never be exported (the driver's questions counter above is the exact one).
    assert _total(series["ray_medagent_llm_latency_seconds_count"], model=SMOL.served_name) >= 1
    assert _total(series["ray_medagent_retrieval_latency_seconds_count"]) >= 1
    assert _total(series["ray_medagent_memory_bank_size_count"], agent="full") >= 1
    assert _total(series["ray_medagent_interviews_total"], mode="single_shot", status="skipped") == 1
    print(f"metrics found: {time.monotonic() - t0:.0f}s")
