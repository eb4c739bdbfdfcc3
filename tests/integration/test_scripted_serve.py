"""The real wiring with a scripted engine: ``LlamaCppServer`` behind real Serve (its engine injected, as Ray's
LLM tests inject ``MockVLLMEngine``), real ``AgentWorker`` actors in a Ray Data pool calling it by handle.
Fast, and independent of any model: what fails here is our plumbing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from medagent.config import AgentConfig, ClusterConfig, GateConfig, LLMConfig, RunConfig
from medagent.types import INVALID, Question
from tests.fakes import ScriptedEngine

pytestmark = pytest.mark.integration

SCRIPTED = LLMConfig(name="scripted", served_name="scripted", backend="llamacpp")
QUESTIONS = [
    Question(id=f"q{i}", text=f"Question {i}?", options={"A": "a", "B": "b", "C": "c"}, benchmark="t")
    for i in range(4)
]


def test_scripted_engine_behind_real_serve_and_a_ray_data_pool(
    ray_cluster: Any, cluster_cfg: ClusterConfig
) -> None:
    from ray import serve

    from actors.backends import build_llm_app, llm_endpoint
    from actors.builder import LLM_APP, LLM_ROUTE
    from medagent.llm.endpoints import Endpoints
    from pipelines.benchmark_run import stream_predictions

    serve.run(
        build_llm_app(SCRIPTED, cluster_cfg, engine_factory=ScriptedEngine),
        name=LLM_APP,
        route_prefix=LLM_ROUTE,
    )
    try:
        endpoint = llm_endpoint(SCRIPTED, cluster_cfg)
        cluster = replace(cluster_cfg, workers=replace(cluster_cfg.workers, batch_size=2))
        for agent in (
            AgentConfig(),
            AgentConfig(
                mode="gated", gate=GateConfig(threshold=0.5, tools_mode="no_search", record_both=True)
            ),
        ):
            cfg = RunConfig(agent=agent, llm=SCRIPTED, cluster=cluster)
            preds = [p for batch in stream_predictions(cfg, QUESTIONS, Endpoints(endpoint)) for p in batch]
            assert sorted(p.id for p in preds) == [q.id for q in QUESTIONS]
            # The scripted engine answers "A" to every prompt (the options are listed "(A) a").
            assert all(p.error is None and p.answer == "A" for p in preds), preds
            if agent.mode == "gated":
                gates = [next(s for s in p.trace if s["kind"] == "gate") for p in preds]
                # The logprobs travelled through Serve: 0.8 vs 0.2 among the options.
                assert all(g["method"] == "logprobs" and g["confidence"] == pytest.approx(0.8) for g in gates)
                assert all(g["tools_answer"] not in (None, INVALID) for g in gates)
    finally:
        serve.delete(LLM_APP)


class RefusingEngine(ScriptedEngine):
    """Refuses a prompt as llama.cpp refuses one it cannot take (a ValueError), else answers as scripted."""

    def complete_sync(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1].get("content") == "refuse me":
            raise ValueError("prompt refused")
        return super().complete_sync(body)


def test_the_ingress_reaches_the_llm_application_by_handle(
    ray_cluster: Any, cluster_cfg: ClusterConfig
) -> None:
    """The HTTP product's ``/v1/chat/completions`` forwards to the CPU LLM's own application (``LLM_APP``)
    across applications, with the answers and errors it gives; it waits for that application to exist."""
    import httpx
    from ray import serve

    from actors.apps import build_serving_apps
    from actors.backends import build_llm_app
    from actors.builder import LLM_APP, LLM_DEPLOYMENT, LLM_ROUTE
    from pipelines.common import run_apps
    from tests.integration.conftest import clear_serve_apps

    llm = replace(SCRIPTED, n_ctx=512)
    clear_serve_apps()
    # The main application first, as a RayService may start it: its ingress has no LLM handle yet.
    (main,) = build_serving_apps(llm, None, None, None, cluster_cfg, name="medagent-scripted")
    run_apps([main])
    url = f"http://{cluster_cfg.serve.http_host}:{cluster_cfg.serve.http_port}"
    chat = f"{url}/v1/chat/completions"
    hello = {"messages": [{"role": "user", "content": "Pick (B)."}], "max_tokens": 8}
    try:
        early = httpx.post(chat, json=hello, timeout=60)
        assert early.status_code == 503 and LLM_APP in early.json()["detail"], early.text
        serve.run(
            build_llm_app(llm, cluster_cfg, engine_factory=RefusingEngine),
            name=LLM_APP,
            route_prefix=LLM_ROUTE,
        )
        assert LLM_DEPLOYMENT not in serve.status().applications["medagent-scripted"].deployments
        ok = httpx.post(chat, json=hello, timeout=60)
        assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == '{"answer": "B"}'
        refused = httpx.post(chat, json={"messages": [{"role": "user", "content": "refuse me"}]}, timeout=60)
        assert refused.status_code == 400 and refused.json()["detail"] == "prompt refused", refused.text
        too_long = httpx.post(chat, json={**hello, "max_tokens": 513}, timeout=60)
        assert too_long.status_code == 400 and "context size 512" in too_long.json()["detail"]
        assert httpx.post(chat, json={"messages": []}, timeout=60).status_code == 422
        models = httpx.get(f"{url}/v1/models", timeout=30).json()["data"]
        assert [m["id"] for m in models] == ["scripted"]
    finally:
        clear_serve_apps()
