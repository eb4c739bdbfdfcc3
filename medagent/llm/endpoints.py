"""Where the workers find the models and services a run deployed: typed endpoint records.

The driver decides where everything lives (``actors.deploy``) and hands these records to the Ray Data
workers as constructor arguments, so they are plain frozen dataclasses: they pickle, compare by value and
import without Ray. The worker side turns them into clients (``actors.common``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HandleEndpoint:
    """A Serve deployment reached by a handle inside the cluster (no HTTP hop)."""

    app: str
    deployment: str


@dataclass(frozen=True)
class HttpEndpoint:
    """An OpenAI-compatible (LLM) or medagent (services) HTTP server at ``base_url``."""

    base_url: str


# How a worker reaches the LLM.
LLMEndpoint = HandleEndpoint | HttpEndpoint


@dataclass(frozen=True)
class ServiceHandles:
    """The retriever and reranker reached by handles: the Reranker in ``app``, the Retriever in
    ``retriever_app`` (its own application, see ``actors.apps``)."""

    app: str
    retriever_app: str


# How a worker reaches the retriever and reranker: handles in-cluster, or the ingress over HTTP
# (``/v1/retrieve``, ``/v1/rerank`` under ``base_url``).
ServicesEndpoint = ServiceHandles | HttpEndpoint


@dataclass(frozen=True)
class Endpoints:
    """Everything a run's workers call: the LLM, and the retriever/reranker when the agent searches."""

    llm: LLMEndpoint
    services: ServicesEndpoint | None = None
