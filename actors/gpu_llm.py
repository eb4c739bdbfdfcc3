"""GPU LLM serving through Ray's own ``ray.serve.llm`` (vLLM). Imported only when ``llm.backend=vllm``.

``ray.serve.llm`` raises ImportError without vllm (the ``gpu`` extra), so nothing else imports this
module. Model facts (TP size, context length, tool parser) come from ``conf/llm/*.yaml``.
"""

from __future__ import annotations

from typing import Any

from medagent.config import ClusterConfig, LLMConfig


def vllm_llm_config(llm: LLMConfig, cluster: ClusterConfig) -> Any:
    """Builds a ``ray.serve.llm.LLMConfig`` from our typed config."""
    from ray.serve.llm import LLMConfig as ServeLLMConfig

    return ServeLLMConfig(**vllm_llm_kwargs(llm, cluster))


def vllm_llm_kwargs(llm: LLMConfig, cluster: ClusterConfig) -> dict[str, Any]:
    """The ``ray.serve.llm.LLMConfig`` arguments (plain data: testable where vllm is not installed)."""
    engine_kwargs: dict[str, Any] = {
        "tensor_parallel_size": llm.tensor_parallel_size,
        "pipeline_parallel_size": llm.pipeline_parallel_size,
        "max_model_len": llm.max_model_len,
        **llm.engine_kwargs,
    }
    if llm.tool_call_parser:
        # Native tool calls (Qwen2.5 uses the hermes format) instead of JSON in the text.
        engine_kwargs.setdefault("enable_auto_tool_choice", True)
        engine_kwargs.setdefault("tool_call_parser", llm.tool_call_parser)
    source = llm.model.local_path or llm.model.hub_id
    if not source:
        raise ValueError(f"llm {llm.name!r}: set model.hub_id or model.local_path for the vllm backend")
    extra: dict[str, Any] = {
        "placement_group_config": {
            "bundle_per_worker": {"GPU": 1, **cluster.llm_resources},
            "strategy": cluster.llm_placement_strategy,
        }
    }
    if cluster.llm_accelerator_type:
        extra["accelerator_type"] = cluster.llm_accelerator_type
    return dict(
        **extra,
        model_loading_config={"model_id": llm.served_name, "model_source": source},
        engine_kwargs=engine_kwargs,
        deployment_config={
            "autoscaling_config": {
                "min_replicas": cluster.llm_replicas,
                "max_replicas": cluster.llm_replicas,
            },
            "max_ongoing_requests": cluster.llm_max_ongoing_requests,
        },
    )


def build_vllm_app(llm: LLMConfig, cluster: ClusterConfig) -> Any:
    """The OpenAI-compatible application (ingress + vLLM server) for ``serve.run``."""
    from ray.serve.llm import build_openai_app

    return build_openai_app({"llm_configs": [vllm_llm_config(llm, cluster)]})
