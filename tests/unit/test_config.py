"""Compose every config group without running anything (Hydra's recommended app test)."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from medagent.config import RunConfig
from pipelines.common import register_configs

CONF = Path(__file__).resolve().parents[2] / "conf"
register_configs()


def _compose(*overrides: str) -> RunConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def test_default_is_the_cpu_demo() -> None:
    cfg = _compose()
    assert isinstance(cfg, RunConfig)
    assert cfg.benchmark.name == "medqa" and cfg.agent.mode == "standalone"
    assert cfg.llm.backend == "llamacpp" and cfg.llm.model.pypi
    assert cfg.cluster.name == "local" and cfg.cluster.serve.http_host == "127.0.0.1"


# Agent options that are a mode with a setting changed: option -> its mode.
AGENT_VARIANTS = {"full_held_out": "full"}


@pytest.mark.parametrize("group", ["llm", "benchmark", "cluster", "agent"])
def test_every_option_of_every_group_composes(group: str) -> None:
    for yaml in sorted((CONF / group).glob("*.yaml")):
        overrides = [f"{group}={yaml.stem}"]
        if yaml.stem == "openai-endpoint":
            overrides += ["llm.base_url=http://x/v1", "llm.served_name=m"]
        if yaml.stem == "jsonl":
            overrides += ["benchmark.options.path=/tmp/x.jsonl"]
        cfg = _compose(*overrides)
        node = getattr(cfg, group)
        # An agent option names its mode, or is a mode with one setting changed (AGENT_VARIANTS).
        want = AGENT_VARIANTS.get(yaml.stem, yaml.stem) if group == "agent" else yaml.stem
        assert (node.mode if group == "agent" else node.name) == want
    if group == "agent":
        held = _compose("agent=full_held_out").agent
        assert (
            held.retrieval.hold_out_own_evidence
            and not _compose("agent=full").agent.retrieval.hold_out_own_evidence
        )


def test_gpu_config_carries_model_facts() -> None:
    cfg = _compose("llm=qwen2.5-72b-instruct", "cluster=single_gpu")
    assert cfg.llm.backend == "vllm" and cfg.llm.tensor_parallel_size == 4
    assert cfg.llm.tool_call_parser == "hermes"


def test_overrides_are_type_checked() -> None:
    assert _compose("limit=50", "benchmark=usmle_step1").limit == 50
    with pytest.raises(ConfigCompositionException, match="limit"):
        _compose("limit=many")
    with pytest.raises(ConfigCompositionException, match="not_a_field"):
        _compose("llm.not_a_field=1")
