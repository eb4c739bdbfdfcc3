"""GPU tier: runs only where the ``gpu`` extra (vllm) is installed."""

import pytest

pytest.importorskip("vllm")
pytestmark = pytest.mark.gpu


def test_qwen72b_tp4_application_builds() -> None:
    # Building does not start vLLM, so this also runs on a CPU machine that has the gpu extra.
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
    assert build_vllm_app(llm, ClusterConfig()) is not None
