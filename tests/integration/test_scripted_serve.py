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
        cluster = replace(cluster_cfg, batch_size=2)
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
