"""The fault tolerance we rely on and do not set ourselves (actors/builder.py says why): pinned here, so a
Ray upgrade that changes it fails a fast test instead of a long run."""

from __future__ import annotations

import pytest

from actors.builder import agent_worker_map_kwargs, llm_deployment_options
from medagent.config import ClusterConfig
from tests.configs import cluster_config


def _extra_remote_args() -> dict[str, object]:
    """What ``agent_worker_map_kwargs`` passes beyond map_batches' named parameters (nothing: we do not
    override Ray Data's restart / retry defaults)."""
    named = {"compute", "num_cpus", "num_gpus", "batch_size"}
    return {k: v for k, v in agent_worker_map_kwargs(ClusterConfig(), 4).items() if k not in named}


def test_ray_data_restarts_pool_actors_and_retries_their_batches() -> None:
    pytest.importorskip("ray.data")
    from ray.data import DataContext
    from ray.data._internal.execution.operators.actor_pool_map_operator import ActorPoolMapOperator

    ctx = DataContext.get_current()
    args = ActorPoolMapOperator._apply_default_remote_args(_extra_remote_args(), ctx)
    assert args["max_restarts"] == -1 and args["max_task_retries"] == -1
    assert ctx.actor_task_retry_on_errors is False  # our own exceptions are bugs: never retried
    assert ctx.max_errored_blocks == 0  # a batch that fails for good fails the run, nothing dropped


def test_the_llamacpp_llm_replica_is_health_checked() -> None:
    """The llama.cpp deployment (CPU) sets its own health check: every 10 s, 60 s timeout."""
    opts = llm_deployment_options(ClusterConfig())
    assert opts["health_check_period_s"] == 10 and opts["health_check_timeout_s"] == 60


def test_the_vllm_replica_relies_on_ray_serve_llms_health_check_defaults() -> None:
    """The vLLM path (``actors/gpu_llm.vllm_llm_config``) sets no health check: ``ray.serve.llm`` applies
    its defaults (every 10 s, 10 s timeout; env RAY_SERVE_LLM_DEFAULT_HEALTH_CHECK_*), and its
    ``LLMServer.check_health`` asks the vLLM engine. Readable without vLLM installed."""
    constants = pytest.importorskip("ray.llm._internal.serve.constants")
    assert constants.DEFAULT_HEALTH_CHECK_PERIOD_S == 10
    assert constants.DEFAULT_HEALTH_CHECK_TIMEOUT_S == 10


def test_workers_reach_vllm_through_an_address_not_the_bind_all_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker on a node without a Serve replica has no proxy of its own: it must call the head's."""
    import ray.util

    from actors.backends import llm_endpoint
    from medagent.config import LLMConfig

    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "10.0.0.7")
    vllm = LLMConfig(name="big", backend="vllm")
    on_cluster = llm_endpoint(vllm, cluster_config(http_host="0.0.0.0", http_port=8000))
    assert on_cluster.base_url == "http://10.0.0.7:8000/llm/v1"
    local = llm_endpoint(vllm, cluster_config(http_host="127.0.0.1", http_port=8000))
    assert local.base_url == "http://127.0.0.1:8000/llm/v1"
