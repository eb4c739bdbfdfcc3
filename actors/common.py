"""Helpers shared by the Ray Data worker classes: input validation and the LLM client they call."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from actors.builder import RETRIEVER_DEPLOYMENT
from actors.metrics import MeteredChatModel
from medagent.config import LLMConfig
from medagent.llm.base import ChatModel
from medagent.llm.endpoints import HandleEndpoint, LLMEndpoint, ServiceHandles, ServicesEndpoint
from medagent.llm.handle import DeploymentHandleChatModel
from medagent.llm.openai_client import OpenAIChatClient


def worker_logging(logger: logging.Logger) -> None:
    """Makes ``logger``'s INFO lines reach the worker's log (and the driver: ``log_to_driver``).

    A Ray worker leaves the root logger unconfigured, so INFO would go nowhere; where the root logger has a
    handler (a driver after ``setup_logging``, pytest) the records propagate there unchanged. A logger that
    gets its own handler stops propagating: a library in the worker may configure the root logger later
    (``logging.basicConfig``), and every line would then reach the driver twice.
    """
    logger.setLevel(logging.INFO)
    if logging.getLogger().handlers or logger.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False


def validate_columns(batch: dict[str, Any], required: Sequence[str], stage: str) -> None:
    """Names the stage and the missing column instead of failing with a bare KeyError."""
    missing = [k for k in required if k not in batch]
    if missing:
        raise ValueError(f"{stage}: input batch lacks required column(s) {missing}; has {sorted(batch)}")


def chat_model_for(llm: LLMConfig, endpoint: LLMEndpoint) -> ChatModel:
    """The client for ``actors.backends.llm_endpoint``: a Serve handle in-cluster, else OpenAI over HTTP;
    wrapped so that every call's latency and tokens reach the metrics (``actors.metrics``)."""
    client: ChatModel
    if isinstance(endpoint, HandleEndpoint):
        from ray import serve

        handle = serve.get_deployment_handle(endpoint.deployment, app_name=endpoint.app)
        client = DeploymentHandleChatModel(handle, llm.served_name, max_retries=llm.max_retries)
    else:
        client = OpenAIChatClient(
            endpoint.base_url,
            llm.served_name,
            api_key_env=llm.api_key_env,
            timeout_s=llm.request_timeout_s,
            max_retries=llm.max_retries,
        )
    return MeteredChatModel(client, llm.served_name)


def services_for(endpoint: ServicesEndpoint | None) -> dict[str, Any]:
    """Retriever and reranker clients for ``actors.builder.services_endpoint`` (empty when None)."""
    if endpoint is None:
        return {}
    from medagent.agent.remote_services import RemoteReranker, RemoteRetriever, http_call

    if isinstance(endpoint, ServiceHandles):
        from ray import serve

        reranker = serve.get_deployment_handle("Reranker", app_name=endpoint.app)
        return {
            "retriever": retriever_for(endpoint),
            "reranker": RemoteReranker(lambda body: reranker.rerank.remote(body)),
        }
    return {
        "retriever": RemoteRetriever(http_call(endpoint.base_url, "/v1/retrieve")),
        "reranker": RemoteReranker(http_call(endpoint.base_url, "/v1/rerank")),
    }


def retriever_for(endpoint: ServicesEndpoint | None) -> Any:
    """The retriever client alone (None when ``endpoint`` is None), for applications served without a
    reranker: ``services_for`` would ask Serve for a Reranker deployment that does not exist."""
    if endpoint is None:
        return None
    from medagent.agent.remote_services import RemoteRetriever, http_call

    if isinstance(endpoint, ServiceHandles):
        from ray import serve

        retriever = serve.get_deployment_handle(RETRIEVER_DEPLOYMENT, app_name=endpoint.retriever_app)
        return RemoteRetriever(lambda body: retriever.retrieve.remote(body))
    return RemoteRetriever(http_call(endpoint.base_url, "/v1/retrieve"))


def text_embedder(model: dict[str, Any] | None) -> Any:
    """A ``medagent.history.TextEmbedder`` over a sentence-transformers model (``ModelConfig`` as a dict),
    loaded now; None when no model is configured."""
    if not model:
        return None
    from medagent.config import ModelConfig, to_dataclass
    from medagent.history import SentenceEmbedder
    from medagent.retrieval.config import EmbedderConfig

    spec: ModelConfig = to_dataclass(ModelConfig, model)
    return SentenceEmbedder.from_config(EmbedderConfig(name=spec.name, model=spec), device="cpu")
