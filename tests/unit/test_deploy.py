"""One deploy path (``actors.deploy``, ``actors.backends``): what a run needs, where each part lives, and the
endpoint records the workers get. Builds only; Ray is never started."""

from __future__ import annotations

import enum
import pickle
from dataclasses import replace
from typing import Any

import cloudpickle
import pytest

from actors.backends import BACKENDS, backend, build_llm_app, llm_endpoint
from actors.builder import APP, LLM_APP, LLM_DEPLOYMENT, retrieval_app_name
from actors.deploy import Needs, endpoints, needs_for_benchmark, needs_for_interviews, serving_apps
from medagent.config import (
    AgentConfig,
    InterviewRunConfig,
    LLMConfig,
    RunConfig,
)
from medagent.llm.endpoints import Endpoints, HandleEndpoint, HttpEndpoint, ServiceHandles
from tests.configs import cluster_config, history_agent_config

CLUSTER = cluster_config(http_host="127.0.0.1", http_port=8000)
CPU = LLMConfig(name="cpu", backend="llamacpp")
VLLM = LLMConfig(name="big", backend="vllm")
EXTERNAL = LLMConfig(name="ext", backend="openai", base_url="http://api.example/v1")


def test_the_registry_covers_every_backend() -> None:
    assert sorted(BACKENDS) == ["llamacpp", "openai", "vllm"]
    assert llm_endpoint(CPU, CLUSTER) == HandleEndpoint(LLM_APP, LLM_DEPLOYMENT)
    assert llm_endpoint(VLLM, CLUSTER) == HttpEndpoint("http://127.0.0.1:8000/llm/v1")
    assert llm_endpoint(EXTERNAL, CLUSTER) == HttpEndpoint("http://api.example/v1")
    # An external endpoint has nothing to deploy; the others build an application of their own.
    assert build_llm_app(EXTERNAL, CLUSTER) is None
    assert backend(CPU).build_app is not None and backend(VLLM).build_app is not None
    # Only the CPU LLM is reached by a handle, so only its application takes the HTTP product's OpenAI route.
    assert backend(CPU).ingress_forwards and not backend(VLLM).ingress_forwards
    assert not backend(EXTERNAL).ingress_forwards
    with pytest.raises(ValueError, match="no base_url"):
        llm_endpoint(replace(EXTERNAL, base_url=None), CLUSTER)
    # An unknown backend is refused with the allowed names (by the config's enum, before the registry).
    with pytest.raises(ValueError, match=r"(?=.*llamacpp)(?=.*openai)(?=.*vllm)"):
        backend(replace(CPU, backend="llama"))


def test_the_registry_takes_a_string_enum_backend() -> None:
    class Backend(str, enum.Enum):
        LLAMACPP = "llamacpp"
        VLLM = "vllm"

    assert backend(replace(CPU, backend=Backend.LLAMACPP)).name == "llamacpp"  # type: ignore[arg-type]
    assert backend(replace(VLLM, backend=Backend.VLLM)).name == "vllm"  # type: ignore[arg-type]


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
def test_endpoint_records_survive_pickling(dumps: Any) -> None:
    """They travel as Ray Data ``fn_constructor_kwargs``."""
    records = [
        HandleEndpoint(LLM_APP, LLM_DEPLOYMENT),
        HttpEndpoint("http://h:1/v1"),
        ServiceHandles(APP, retrieval_app_name(APP)),
        Endpoints(HandleEndpoint(LLM_APP, LLM_DEPLOYMENT), ServiceHandles(APP, retrieval_app_name(APP))),
        Endpoints(HttpEndpoint("http://h:1/v1")),
    ]
    for r in records:
        assert pickle.loads(dumps(r)) == r


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr("actors.apps.build_serving_apps", lambda *a, **k: calls.append((a, k)) or ["apps"])
    return calls


@pytest.mark.parametrize("mode", ["standalone", "no_tools"])
def test_the_cpu_llm_is_its_own_application_whether_or_not_the_agent_searches(
    mode: str, built: list[Any]
) -> None:
    needs = needs_for_benchmark(RunConfig(llm=CPU, cluster=CLUSTER, agent=AgentConfig(mode=mode)))
    assert needs.llm_app
    ep = endpoints(needs)
    assert ep.llm == HandleEndpoint(LLM_APP, LLM_DEPLOYMENT)
    apps = serving_apps(needs)
    if mode == "standalone":  # searches nothing: the LLM application alone
        assert ep.services is None and apps == [] and built == []
    else:  # the serving applications beside it, without the LLM
        assert ep.services == ServiceHandles(APP, retrieval_app_name(APP))
        ((args, _),) = built
        assert apps == ["apps"] and args[0] is None and args[1] is not None


def test_history_runs_deploy_the_same_way(built: list[Any]) -> None:
    cpu_llm = HandleEndpoint(LLM_APP, LLM_DEPLOYMENT)
    single = InterviewRunConfig(llm=CPU, cluster=CLUSTER, agent=history_agent_config(mode="single_shot"))
    assert endpoints(needs_for_interviews(single)) == Endpoints(cpu_llm)
    amq = needs_for_interviews(
        InterviewRunConfig(llm=CPU, cluster=CLUSTER, agent=history_agent_config(mode="amq"))
    )
    assert endpoints(amq) == Endpoints(cpu_llm, ServiceHandles(APP, retrieval_app_name(APP)))
    serving_apps(amq)
    ((args, _),) = built
    assert args[0] is None and args[1] is not None and args[2] is None  # the guideline retriever, no reranker


def test_the_http_product_reaches_the_cpu_llm_in_its_own_application(built: list[Any]) -> None:
    needs = Needs(CPU, CLUSTER, ingress=True, app_name="rag")
    assert needs.llm_app
    assert endpoints(needs).llm == HandleEndpoint(LLM_APP, LLM_DEPLOYMENT)
    serving_apps(needs)
    ((args, kwargs),) = built
    # The ingress's OpenAI route forwards to it (actors.apps takes its handle endpoint, not a deployment).
    assert args[0] is CPU and kwargs["name"] == "rag" and kwargs["sessions_llm"] is CPU
    # vLLM stays its own application beside the product, with its own OpenAI route; an external endpoint
    # is deployed nowhere.
    assert Needs(VLLM, CLUSTER, ingress=True).llm_app
    serving_apps(Needs(VLLM, CLUSTER, ingress=True))
    assert built[-1][0][0] is None and built[-1][1]["sessions_llm"] is VLLM
    assert not Needs(EXTERNAL, CLUSTER, ingress=True).llm_app and not Needs(EXTERNAL, CLUSTER).llm_app
