"""What a run needs served and where each part lives: one plan for every pipeline.

``Needs`` says what a run calls (the LLM; the retriever and reranker when its agent searches; the HTTP
ingress and interview sessions for ``pipelines.serve``); ``serving_apps`` builds the applications that hold
them and ``endpoints`` says how workers reach them. ``pipelines.common.deploy`` runs the plan (only
pipelines start the world). Where the LLM lives is the backend's business (``actors.backends``): its own
application ``LLM_APP`` for every run, the HTTP product included, or nowhere for an external endpoint. The
HTTP product's ingress forwards its OpenAI route to that application by a handle; a RayService deploys the
same applications (``pipelines.serve_app``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.backends import backend, llm_endpoint
from actors.builder import APP, services_endpoint
from medagent.config import (
    ClusterConfig,
    InterviewRunConfig,
    InterviewSessionsConfig,
    LLMConfig,
    OpenScoringConfig,
    RerankerConfig,
    RetrieverConfig,
    RunConfig,
    ServeConfig,
)
from medagent.llm.endpoints import Endpoints


@dataclass(frozen=True)
class Needs:
    """What one run calls, and so what must be served for it.

    Attributes:
        llm, cluster: The model and the cluster it runs on.
        retriever: The retriever the agent searches with (its index: ``index_dir``); None: no search.
        reranker: The reranker next to it; None: none served.
        index_dir: The index the retriever serves.
        missing_index: How to build the index, said when ``index_dir`` holds none; None: not checked here.
        ingress: The HTTP product (``pipelines.serve``): its ingress application always, even without a
            retriever; its ``/v1/chat/completions`` reaches the LLM's application by handle where the
            backend allows (``LLMBackend.ingress_forwards``).
        sessions: Interview sessions a person answers as the patient (``pipelines.serve``).
        app_name: The main application's name.
        scoring: Open-ended scoring whose models run in a Ray actor (``actors.scoring``); None: none.
    """

    llm: LLMConfig
    cluster: ClusterConfig
    retriever: RetrieverConfig | None = None
    reranker: RerankerConfig | None = None
    index_dir: str | None = None
    missing_index: str | None = None
    ingress: bool = False
    sessions: InterviewSessionsConfig | None = None
    app_name: str = APP
    scoring: OpenScoringConfig | None = None

    @property
    def llm_app(self) -> bool:
        """The LLM runs as its own application ``LLM_APP`` (everything but an external endpoint)."""
        return backend(self.llm).build_app is not None


def needs_for_benchmark(cfg: RunConfig) -> Needs:
    """A benchmark run: the LLM, plus the retriever, reranker and index when the agent searches."""
    from medagent.agent import needs_retrieval

    scoring = cfg.open_scoring if cfg.agent.open_ended and cfg.open_scoring.num_gpus > 0 else None
    if not needs_retrieval(cfg.agent):
        return Needs(cfg.llm, cfg.cluster, scoring=scoring)
    hint = (
        f"agent mode {cfg.agent.mode!r} searches, but index_dir={cfg.index_dir} holds no finished index "
        "(manifest.json). Build one with `make index` (the full CPU index, ~45 min), `make demo-index` (a small "
        "one in outputs/index/demo-500, about 3 minutes; then pass index_dir=) or `python -m pipelines.index_corpus`."
    )
    return Needs(cfg.llm, cfg.cluster, cfg.retriever, cfg.reranker, cfg.index_dir, hint, scoring=scoring)


def needs_for_interviews(cfg: InterviewRunConfig) -> Needs:
    """A history-taking run: the LLM, plus the guideline retriever (no reranker) when the agent's mode retrieves."""
    from medagent.history import needs_history_retrieval

    if not needs_history_retrieval(cfg.agent):
        return Needs(cfg.llm, cfg.cluster)
    hint = (
        f"history_agent=amq retrieves guidelines, but index_dir={cfg.index_dir} holds no finished index "
        "(manifest.json). Build one with `make guidelines-index`."
    )
    return Needs(cfg.llm, cfg.cluster, cfg.retriever, None, cfg.index_dir, hint)


def needs_for_serve(cfg: ServeConfig) -> Needs:
    """The HTTP product: ingress, retriever, reranker and (optionally) interview sessions."""
    index_dir = str(Path(cfg.index_dir).resolve()) if cfg.index_dir else None
    return Needs(
        cfg.llm,
        cfg.cluster,
        cfg.retriever,
        cfg.reranker,
        index_dir,
        ingress=True,
        sessions=cfg.interview_sessions,
        app_name=cfg.app_name or APP,
    )


def check_index(needs: Needs) -> None:
    """Refuses a searching run whose index is not finished, before anything is deployed."""
    if needs.retriever is None or needs.missing_index is None:
        return
    if not needs.index_dir or not (Path(needs.index_dir) / "manifest.json").exists():
        raise FileNotFoundError(needs.missing_index)
    built = json.loads((Path(needs.index_dir) / "manifest.json").read_text(encoding="utf-8"))
    mode = str(getattr(needs.retriever.mode, "value", needs.retriever.mode))
    if mode != "dense" and not built.get("config", {}).get("index", {}).get("bm25", True):
        raise ValueError(
            f"retriever={needs.retriever.name} searches with {mode}, which needs BM25, but the index in "
            f"{needs.index_dir} was built without it (index.bm25=false): use retriever=dense, "
            "or rebuild the index with BM25"
        )


def serving_apps(needs: Needs) -> list[Any]:
    """The applications beside the LLM's (``actors.apps.ServeApp``; none when the run only calls the LLM):
    the retriever's own, and the main one with the ingress, reranker and sessions, which reach the LLM's
    application by handle or HTTP (``actors.backends``). Builds, never starts."""
    if needs.retriever is None and not needs.ingress:
        return []
    from actors.apps import build_serving_apps

    ingress_llm = needs.ingress and backend(needs.llm).ingress_forwards
    return build_serving_apps(
        needs.llm if ingress_llm else None,
        needs.retriever,
        needs.reranker,
        needs.index_dir,
        needs.cluster,
        interview_sessions=needs.sessions,
        sessions_llm=needs.llm,
        name=needs.app_name,
    )


def endpoints(needs: Needs) -> Endpoints:
    """How workers reach what ``needs`` deployed."""
    services = services_endpoint(needs.app_name) if needs.retriever is not None else None
    return Endpoints(llm_endpoint(needs.llm, needs.cluster), services)
