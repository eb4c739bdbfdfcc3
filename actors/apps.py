"""The Serve applications medagent deploys, assembled from the deployment options of ``actors.builder``.

Two applications, run side by side on one Serve instance:

* the **retrieval application** (``retrieval_app_name(name)``, route prefix ``/v1/retrieve``): the Retriever
  deployment is its own HTTP ingress, so a ``POST /v1/retrieve`` goes from the proxy straight to the replica
  that searches. Behind the main ingress it paid a second replica and FastAPI's request handling, the larger
  share of the latency Serve added to a search on a 2-core node (``benchmarks/bench_retrieval.py``).
* the **main application** (``name``, route prefix ``/``): the ingress (OpenAI chat, rerank, interview
  sessions, the patient's page, ``/docs``), the CPU LLM, the reranker and the interview sessions, which
  reach the Retriever by a handle to the retrieval application.

Serve's proxy routes a path to the application with the longest matching prefix, so the two share one port.
Builders only build; ``pipelines`` calls ``serve.run`` for each, retrieval first.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from actors.backends import backend, llm_endpoint
from actors.builder import (
    APP,
    LLM_DEPLOYMENT,
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

ROUTES = ("/v1/chat/completions", RETRIEVE_ROUTE, "/v1/rerank", "/v1/models", "/healthz", "/docs")
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
    ingress + LLM + reranker (+ interview sessions); any part may be None.

    ``llm`` is held here only when its backend has a plain deployment (``actors.backends``: the CPU LLM,
    for ``pipelines.serve``'s OpenAI route); the pipelines pass None and reach the LLM's own application.
    A vLLM LLM is always ``ray.serve.llm``'s own OpenAI application (``build_llm_app``) beside these.
    ``interview_sessions`` (its ``enabled`` set) adds the ``InterviewSessions`` deployment behind the
    ``/v1/interview/sessions`` routes: it drives the history-taking agent with the same LLM and retriever
    (``sessions_llm`` names the LLM when it is not served here, e.g. vLLM's own application).
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
    llm_handle = reranker_handle = sessions_handle = None
    server = backend(llm).deployment if llm is not None else None
    if llm is not None and server is not None:
        llm_handle = serve.deployment(**opts[LLM_DEPLOYMENT])(server()).bind(asdict(llm))
    if reranker is not None:
        reranker_handle = serve.deployment(**opts["Reranker"])(RerankerServer).bind(asdict(reranker))
    if interview_sessions is not None and interview_sessions.enabled:
        from actors.interview_sessions import InterviewSessions

        session_llm = llm or sessions_llm
        if session_llm is None:
            raise ValueError("interview sessions need an LLM (llm= or sessions_llm=)")
        # The CPU LLM is a deployment of this application; vLLM / external endpoints are reached over HTTP.
        llm_client = llm_handle if llm_handle is not None else llm_endpoint(session_llm, cluster)
        sessions_handle = serve.deployment(**opts["InterviewSessions"])(InterviewSessions).bind(
            asdict(interview_sessions),
            asdict(session_llm),
            llm_client,
            services_endpoint(name) if retriever_app else None,
        )
    info = {
        "llm_served_name": llm.served_name if llm_handle is not None and llm else None,
        "llm_n_ctx": llm.n_ctx if llm_handle is not None and llm else None,
        "retriever": retriever.name if retriever else None,
        "retrieval_app": retriever_app,
        "reranker": reranker.name if reranker else None,
        "index_dir": index_dir,
        "interview_sessions": sessions_handle is not None,
    }
    ingress = serve.deployment(**opts["Ingress"])(Ingress).bind(
        llm_handle, reranker_handle, info, sessions_handle
    )
    apps.append(ServeApp(name, "/", ingress))
    return apps
