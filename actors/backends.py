"""The LLM backends, by ``llm.backend``: how each one's Serve application is built and how workers reach it.

One registry instead of a branch per backend at every place that deploys or calls the LLM. Builders only
build (``ray`` is imported inside them); ``actors.deploy`` runs what they build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from actors.builder import LLM_APP, LLM_DEPLOYMENT, LLM_ROUTE, serving_deployment_options
from medagent.config import ClusterConfig, LLMConfig
from medagent.llm.endpoints import HandleEndpoint, HttpEndpoint, LLMEndpoint

AppBuilder = Callable[[LLMConfig, ClusterConfig, Any], Any]


@dataclass(frozen=True)
class LLMBackend:
    """One ``llm.backend``.

    Attributes:
        name: The ``llm.backend`` value.
        build_app: ``(llm, cluster, engine_factory) -> Application`` of the stand-alone LLM application
            (``LLM_APP`` at ``LLM_ROUTE``); None for an endpoint that runs outside the cluster.
        endpoint: ``(llm, cluster) -> LLMEndpoint``: how workers reach it.
        ingress_forwards: The HTTP product's ingress (``actors.apps``) forwards its ``/v1/chat/completions``
            to this backend's application by a handle (``endpoint`` gives a ``HandleEndpoint``). vLLM's
            application brings its own OpenAI route at ``LLM_ROUTE``; an external endpoint is not served.
    """

    name: str
    build_app: AppBuilder | None
    endpoint: Callable[[LLMConfig, ClusterConfig], LLMEndpoint]
    ingress_forwards: bool = False


def _llamacpp_app(llm: LLMConfig, cluster: ClusterConfig, engine_factory: Any = None) -> Any:
    from ray import serve

    from actors.llm_deployment import LlamaCppHTTPServer

    deployment = serve.deployment(**serving_deployment_options(cluster)[LLM_DEPLOYMENT])(LlamaCppHTTPServer)
    return deployment.bind(asdict(llm), engine_factory) if engine_factory else deployment.bind(asdict(llm))


def _vllm_app(llm: LLMConfig, cluster: ClusterConfig, engine_factory: Any = None) -> Any:
    from actors.gpu_llm import build_vllm_app

    return build_vllm_app(llm, cluster)


def _reachable_host(http_host: str) -> str:
    """An address workers on any node can call. ``0.0.0.0`` is where proxies listen, not an address: Serve
    runs proxies only on nodes holding a replica, plus the controller's node, which is the head, where the
    driver runs (``ray job submit``, KubeRay RayJob). So callers use the driver's node address."""
    if http_host in ("0.0.0.0", "::", ""):
        import ray.util

        return str(ray.util.get_node_ip_address())
    return http_host


def _handle(llm: LLMConfig, cluster: ClusterConfig) -> LLMEndpoint:
    return HandleEndpoint(app=LLM_APP, deployment=LLM_DEPLOYMENT)


def _served_http(llm: LLMConfig, cluster: ClusterConfig) -> LLMEndpoint:
    # ray.serve.llm's handle API streams typed vLLM objects; its OpenAI route is the stable contract.
    host = _reachable_host(cluster.serve.http_host)
    return HttpEndpoint(base_url=f"http://{host}:{cluster.serve.http_port}{LLM_ROUTE}/v1")


def _external(llm: LLMConfig, cluster: ClusterConfig) -> LLMEndpoint:
    if not llm.base_url:
        raise ValueError(f"llm {llm.name!r} has backend=openai but no base_url")
    return HttpEndpoint(base_url=llm.base_url)


BACKENDS: dict[str, LLMBackend] = {
    b.name: b
    for b in (
        LLMBackend("llamacpp", _llamacpp_app, _handle, ingress_forwards=True),
        LLMBackend("vllm", _vllm_app, _served_http),
        LLMBackend("openai", None, _external),
    )
}


def backend(llm: LLMConfig) -> LLMBackend:
    """The registry entry of ``llm.backend`` (a plain string or a ``str`` enum member)."""
    key = getattr(llm.backend, "value", llm.backend)
    try:
        return BACKENDS[str(key)]
    except KeyError:
        raise ValueError(f"unknown llm.backend {key!r}; expected one of {sorted(BACKENDS)}") from None


def build_llm_app(llm: LLMConfig, cluster: ClusterConfig, engine_factory: Any = None) -> Any | None:
    """The stand-alone Serve application for ``llm``, or None for an external endpoint (``backend=openai``).

    ``engine_factory`` (CPU backend only) replaces the llama.cpp engine: tests serve a scripted one.
    """
    b = backend(llm)
    return None if b.build_app is None else b.build_app(llm, cluster, engine_factory)


def llm_endpoint(llm: LLMConfig, cluster: ClusterConfig) -> LLMEndpoint:
    """How workers reach ``llm``: a handle to the LLM application in-cluster, else OpenAI HTTP."""
    return backend(llm).endpoint(llm, cluster)
