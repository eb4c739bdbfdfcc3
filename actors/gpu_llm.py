"""LLM serving through Ray's own ``ray.serve.llm`` (vLLM). Imported only when ``llm.backend=vllm``.

``ray.serve.llm`` raises ImportError without vllm (the ``gpu`` extra on a cluster, the vLLM CPU tier of
``make setup`` here), so nothing else imports this module. Model facts (TP size, context length, tool
parser) come from ``conf/llm/*.yaml``; where each worker of a replica runs (its bundle: GPUs on a GPU
cluster, CPUs on the CPU tier) comes from ``conf/cluster/*.yaml``. The two tiers share every line here.
"""

from __future__ import annotations

from typing import Any

from medagent.config import ClusterConfig, LLMConfig
from medagent.models import ModelNotFoundError, resolve_model

# Serve's request router that sends a request to the replica whose prefix tree matches its prompt most (the
# replica whose vLLM prefix cache holds the conversation so far), falling back to power-of-two choices when
# the replicas' queues are imbalanced.
PREFIX_ROUTER = "ray.serve.llm.request_router.PrefixCacheAffinityRouter"


def vllm_llm_config(llm: LLMConfig, cluster: ClusterConfig) -> Any:
    """Builds a ``ray.serve.llm.LLMConfig`` from our typed config."""
    from ray.serve.llm import LLMConfig as ServeLLMConfig

    return ServeLLMConfig(**vllm_llm_kwargs(llm, cluster))


def model_source(llm: LLMConfig) -> str:
    """What vLLM loads: an explicit local path, else the PyPI-shipped copy (materialised once into the
    driver's model cache), else the hub id, which vLLM downloads on the LLM node itself (a 72B model must
    not pass through the driver).

    Raises:
        ValueError: No source is configured.
        ModelNotFoundError: A local path or PyPI copy is configured, missing, and there is no hub id.
    """
    spec = llm.model.spec()
    if spec.local_path or spec.pypi:
        try:
            return str(resolve_model(spec, allow_hub=False))
        except ModelNotFoundError:
            if not spec.hub_id:
                raise
    if spec.hub_id:
        return spec.hub_id
    raise ValueError(
        f"llm {llm.name!r}: set model.local_path, model.pypi or model.hub_id for the vllm backend"
    )


def vllm_llm_kwargs(llm: LLMConfig, cluster: ClusterConfig, source: str | None = None) -> dict[str, Any]:
    """The ``ray.serve.llm.LLMConfig`` arguments (plain data: testable where vllm is not installed).

    Args:
        source: What vLLM loads; None resolves it (``model_source``).
    """
    engine_kwargs: dict[str, Any] = {
        "tensor_parallel_size": llm.tensor_parallel_size,
        "pipeline_parallel_size": llm.pipeline_parallel_size,
        "max_model_len": llm.max_model_len,
        # An agent resends its whole conversation every turn: the prefix cache is what makes that cheap.
        # Explicit, so a vLLM whose default changes keeps it.
        "enable_prefix_caching": True,
        # usage.prompt_tokens_details.cached_tokens in every response (medagent.llm.base.parse_usage).
        "enable_prompt_tokens_details": True,
        # One sequence per request Serve may hand this replica (cluster.llm.max_ongoing_requests, sized in
        # conf/cluster/*.yaml as workers x questions in flight per worker / replicas, with headroom): no
        # request the router sent waits inside vLLM for a batch slot.
        "max_num_seqs": cluster.llm.max_ongoing_requests,
        **llm.engine_kwargs,
    }
    if cluster.llm.gpu_memory_utilization is not None:
        # The cluster sets the LLM's share of each GPU: the rest holds the deployments placed beside it.
        engine_kwargs["gpu_memory_utilization"] = cluster.llm.gpu_memory_utilization
    if llm.tool_call_parser:
        # Native tool calls (Qwen2.5 uses the hermes format) instead of JSON in the text.
        engine_kwargs.setdefault("enable_auto_tool_choice", True)
        engine_kwargs.setdefault("tool_call_parser", llm.tool_call_parser)
    extra: dict[str, Any] = {
        "placement_group_config": {
            # One bundle per TP x PP worker; cluster.llm.resources pins them to the LLM node group.
            "bundle_per_worker": {**(cluster.llm.bundle or {"GPU": 1.0}), **cluster.llm.resources},
            "strategy": cluster.llm.placement_strategy,
        }
    }
    if cluster.llm.accelerator_type:
        extra["accelerator_type"] = cluster.llm.accelerator_type
    env: dict[str, str] = {}
    worker_gpus = float((cluster.llm.bundle or {}).get("GPU", 1.0))
    if 0 < worker_gpus < 1:
        # A TP worker asks for a whole GPU unless told (vLLM's VLLM_RAY_PER_WORKER_GPUS): with a fractional
        # bundle it asks for that fraction, and the rest of each GPU stays free for the retriever, reranker
        # and scoring actors (conf/cluster/paper_node_*.yaml).
        env["VLLM_RAY_PER_WORKER_GPUS"] = str(worker_gpus)
    env.update({str(k): str(v) for k, v in llm.engine_env.items()})
    if env:
        extra["runtime_env"] = {"env_vars": env}
    deployment_config: dict[str, Any] = {
        "autoscaling_config": {
            "min_replicas": cluster.llm.replicas,
            "max_replicas": cluster.llm.replicas,
        },
        "max_ongoing_requests": cluster.llm.max_ongoing_requests,
        # As the CPU LLM (actors.builder.llm_deployment_options): one access-log line per call drowns
        # the driver's output; Serve's metrics still count every request.
        "logging_config": {"enable_access_log": False},
    }
    if cluster.llm.replicas > 1 and cluster.llm.prefix_router:
        # A conversation's next turn goes where its prefix is cached; Serve's default (power of two
        # choices) spreads an agent's turns over the replicas and recomputes the prefix on each.
        router: dict[str, Any] = {"request_router_class": PREFIX_ROUTER}
        if cluster.llm.prefix_router_imbalance is not None:
            router["request_router_kwargs"] = {"imbalanced_threshold": cluster.llm.prefix_router_imbalance}
        deployment_config["request_router_config"] = router
    return dict(
        **extra,
        model_loading_config={
            "model_id": llm.served_name,
            "model_source": source if source is not None else model_source(llm),
        },
        engine_kwargs=engine_kwargs,
        deployment_config=deployment_config,
    )


def vllm_app_args(llm: LLMConfig, cluster: ClusterConfig, source: str | None = None) -> dict[str, Any]:
    """``build_openai_app``'s builder config: the model plus the OpenAI ingress's own resources (Serve's
    default, a whole CPU, would leave no room for the engine on a small node)."""
    return {
        "llm_configs": [vllm_llm_kwargs(llm, cluster, source)],
        "ingress_deployment_config": {
            "ray_actor_options": {"num_cpus": cluster.serve.ingress_num_cpus},
            "logging_config": {"enable_access_log": False},
        },
    }


def build_vllm_app(llm: LLMConfig, cluster: ClusterConfig) -> Any:
    """The OpenAI-compatible application (ingress + vLLM server) for ``serve.run``."""
    from ray.serve.llm import build_openai_app

    return build_openai_app(vllm_app_args(llm, cluster))
