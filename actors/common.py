"""Helpers shared by the Ray Data worker classes: input validation and the LLM client they call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from medagent.config import LLMConfig
from medagent.llm.base import ChatModel
from medagent.llm.handle import DeploymentHandleChatModel
from medagent.llm.openai_client import OpenAIChatClient


def validate_columns(batch: dict[str, Any], required: Sequence[str], stage: str) -> None:
    """Names the stage and the missing column instead of failing with a bare KeyError."""
    missing = [k for k in required if k not in batch]
    if missing:
        raise ValueError(f"{stage}: input batch lacks required column(s) {missing}; has {sorted(batch)}")


def chat_model_for(llm: LLMConfig, endpoint: dict[str, Any]) -> ChatModel:
    """The client for ``actors.builder.llm_endpoint``: a Serve handle in-cluster, else OpenAI over HTTP."""
    if endpoint["kind"] == "handle":
        from ray import serve

        handle = serve.get_deployment_handle(endpoint["deployment"], app_name=endpoint["app"])
        return DeploymentHandleChatModel(handle, llm.served_name, max_retries=llm.max_retries)
    return OpenAIChatClient(
        endpoint["base_url"],
        llm.served_name,
        api_key_env=llm.api_key_env,
        timeout_s=llm.request_timeout_s,
        max_retries=llm.max_retries,
    )
