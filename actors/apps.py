"""The Serve applications medagent deploys, assembled from the deployment options of ``actors.builder``.

Two applications, run side by side on one Serve instance, beside the LLM's own (``LLM_APP``, built by
``actors.backends``, deployed first by ``pipelines.common.run_llm_app``):

* the **retrieval application** (``retrieval_app_name(name)``, route prefix ``/v1/retrieve``): the Retriever
  deployment is its own HTTP ingress, so a ``POST /v1/retrieve`` goes from the proxy straight to the replica
  that searches. Behind the main ingress it paid a second replica and FastAPI's request handling, the larger
  share of the latency Serve added to a search on a 2-core node (``benchmarks/bench_retrieval.py``).
* the **main application** (``name``, route prefix ``/``): the ingress (OpenAI chat, rerank, interview
  sessions, the patient's page, ``/openapi.json``), the reranker and the interview sessions. The ingress's OpenAI
  route and the sessions reach the LLM's application by a handle across applications (the CPU LLM; vLLM
  is called over its own OpenAI route), and the sessions reach the Retriever by a handle to the
  retrieval application.

Serve's proxy routes a path to the application with the longest matching prefix, so the two share one port.
Builders only build; ``pipelines`` calls ``serve.run`` for each, retrieval first.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from actors.backends import llm_endpoint
from actors.builder import (
    APP,
    RETRIEVE_ROUTE,
    RETRIEVER_DEPLOYMENT,
    retrieval_app_name,
    retriever_threads,
    services_endpoint,
    serving_deployment_options,
)
from medagent.config import (
    ClusterConfig,
    InterviewSessionsConfig,
    LLMConfig,
    RerankerConfig,
    RetrieverConfig,
)
from medagent.llm.endpoints import HandleEndpoint

ROUTES = ("/v1/chat/completions", RETRIEVE_ROUTE, "/v1/rerank", "/v1/models", "/healthz", "/openapi.json")
# Served when build_serving_apps gets interview_sessions (a person plays the patient).
INTERVIEW_ROUTES = (
    "POST /v1/interview/sessions",
    "POST /v1/interview/sessions/{id}/answer",
    "GET /v1/interview/sessions/{id}",
    "DELETE /v1/interview/sessions/{id}",
)


@dataclass(frozen=True)
class ServeApp:
    """One application: what ``pipelines.common.run_apps`` deploys under ``name`` at ``route_prefix``."""

    name: str
    route_prefix: str
    app: Any


def build_retrieval_app(retriever: RetrieverConfig, index_dir: str, cluster: ClusterConfig) -> Any:
    """The Retriever over ``index_dir`` as an application of its own (it is the ingress)."""
    from ray import serve

    from actors.retrieval_servers import RetrieverHTTPServer

    opts = serving_deployment_options(cluster)[RETRIEVER_DEPLOYMENT]
    return serve.deployment(**opts)(RetrieverHTTPServer).bind(
        index_dir, asdict(retriever), retriever_threads(cluster)
    )


def build_serving_apps(
    llm: LLMConfig | None,
    retriever: RetrieverConfig | None,
    reranker: RerankerConfig | None,
    index_dir: str | None,
    cluster: ClusterConfig,
    interview_sessions: InterviewSessionsConfig | None = None,
    sessions_llm: LLMConfig | None = None,
    name: str = APP,
) -> list[ServeApp]:
    """The retrieval application (when ``retriever`` is set) and the main application named ``name``:
    ingress + reranker (+ interview sessions); any part may be None. The LLM is never part of them.

    ``llm`` is the LLM the ingress's ``/v1/chat/completions`` forwards to: its own application
    (``actors.backends.build_llm_app``, served as ``LLM_APP`` beside these), reached by a handle, so only a
    backend with ``ingress_forwards`` (the CPU LLM); None: that route answers 503 (vLLM has its own OpenAI
    route under ``LLM_ROUTE``). ``interview_sessions`` (its ``enabled`` set) adds the ``InterviewSessions``
    deployment behind the ``/v1/interview/sessions`` routes: it drives the history-taking agent with the
    same LLM (``sessions_llm`` when ``llm`` is None) and retriever, reached as the pipelines' workers reach
    them (``actors.backends.llm_endpoint``).
    """
    from ray import serve

    from actors.ingress import Ingress
    from actors.retrieval_servers import RerankerServer

    apps = []
    retriever_app = None
    if retriever is not None:
        if not index_dir:
            raise ValueError("a retriever needs index_dir= (an index built by pipelines.index_corpus)")
        retriever_app = retrieval_app_name(name)
        apps.append(
            ServeApp(retriever_app, RETRIEVE_ROUTE, build_retrieval_app(retriever, index_dir, cluster))
        )
    opts = serving_deployment_options(cluster)
    llm_route = reranker_handle = sessions_handle = None
    if llm is not None:
        llm_route = llm_endpoint(llm, cluster)
        if not isinstance(llm_route, HandleEndpoint):
            raise ValueError(
                f"llm {llm.name!r} (backend={llm.backend!r}) is reached over HTTP: the ingress forwards "
                "/v1/chat/completions only to an LLM application reached by handle (pass it as sessions_llm)"
            )
    if reranker is not None:
        reranker_handle = serve.deployment(**opts["Reranker"])(RerankerServer).bind(asdict(reranker))
    if interview_sessions is not None and interview_sessions.enabled:
        from actors.interview_sessions import InterviewSessions

        session_llm = llm or sessions_llm
        if session_llm is None:
            raise ValueError("interview sessions need an LLM (llm= or sessions_llm=)")
        sessions_handle = serve.deployment(**opts["InterviewSessions"])(InterviewSessions).bind(
            asdict(interview_sessions),
            asdict(session_llm),
            llm_endpoint(session_llm, cluster),
            services_endpoint(name) if retriever_app else None,
        )
    info = {
        "llm_served_name": llm.served_name if llm is not None else None,
        "llm_n_ctx": llm.n_ctx if llm is not None else None,
        "retriever": retriever.name if retriever else None,
        "retrieval_app": retriever_app,
        "reranker": reranker.name if reranker else None,
        "index_dir": index_dir,
        "interview_sessions": sessions_handle is not None,
    }
    ingress = serve.deployment(**opts["Ingress"])(Ingress).bind(
        llm_route, reranker_handle, info, sessions_handle
    )
    apps.append(ServeApp(name, "/", ingress))
    return apps
