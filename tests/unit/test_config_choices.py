"""A typo in a closed set fails when the config is composed (or converted, for registered names), before
any pipeline starts Ray, and the error names the allowed values; for every pipeline and every mode."""

import json
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from medagent.agent.base import AGENTS, check_modes
from medagent.config import (
    AnnotateRunConfig,
    InterviewRunConfig,
    LLMConfig,
    Memory,
    RunConfig,
    ServeConfig,
    SuiteRunConfig,
)
from medagent.retrieval.config import EmbedderConfig, IndexConfig, IndexJobConfig
from pipelines.common import register_configs
from tests.configs import agent_config, history_agent_config

CONF = Path(__file__).resolve().parents[2] / "conf"
AGENT_MODES = sorted(p.stem for p in (CONF / "agent").glob("*.yaml"))
HISTORY_AGENTS = sorted(p.stem for p in (CONF / "history_agent").glob("*.yaml"))

register_configs()
for _name, _node in [
    ("interview_run_schema", InterviewRunConfig),
    ("serve_schema", ServeConfig),
    ("suite_schema", SuiteRunConfig),
    ("annotate_schema", AnnotateRunConfig),
    ("index_schema", IndexJobConfig),
]:
    ConfigStore.instance().store(name=_name, node=_node)

# Closed sets every QA pipeline config carries, with their allowed values.
SHARED = {
    "llm.backend": "llamacpp, vllm, openai",
    "llm.tool_calls": "native, json_schema",
    "llm.tool_choice": "auto, required",
    "cluster.llm.placement_strategy": "PACK, SPREAD, STRICT_PACK, STRICT_SPREAD",
    "cluster.serve.proxy_location": "EveryNode, HeadOnly, Disabled",
    "cluster.serve.log_level": "DEBUG, INFO, WARNING, ERROR, CRITICAL",
    "cluster.ray.auth_mode": "token",
    "retriever.mode": "dense, bm25, hybrid",
}
QA_AGENT = {
    "agent.loop.memory": "cache_prune, documents, context, none",
    "agent.answer.final_answer_call": "always, fallback",
    "agent.retrieval.mode": "dense, bm25, hybrid",
    "agent.gate.confidence": "auto, logprobs, samples",
}
HISTORY_AGENT = {
    "mode": "amq, single_shot",
    "questioning.policy": "order, information",
    "questioning.priorities": "paper, physician",
    "single_shot.context": "opening, full, transcript_run",
    "retrieval.mode": "dense, bm25, hybrid",
}

# Closed sets of the indexing job (medagent.retrieval.config).
INDEX_JOB = {
    "index.kind": "flat, ivfpq, hnsw",
    "index.hnsw_storage": "flat, sq8, pq",
    "embedder.metric": "l2, ip",
    "embedder.pooling": "cls, mean",
    "corpus.chunking.mode": "plain, parent_child",
}


def _convert(config: str, *overrides: str) -> Any:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return OmegaConf.to_object(compose(config_name=config, overrides=list(overrides)))


def _error(config: str, *overrides: str) -> str:
    """Every message in the chain of the error that composing (then converting) the config raises."""
    with pytest.raises(Exception) as info:  # noqa: PT011  # hydra wraps the validation error
        _convert(config, *overrides)
    messages, exc = [], info.value
    while exc is not None:
        messages.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    return "\n".join(messages)


@pytest.mark.parametrize("mode", AGENT_MODES)
@pytest.mark.parametrize("key", sorted(QA_AGENT))
def test_run_benchmark_agent_typo_fails_naming_the_allowed_values(mode: str, key: str) -> None:
    message = _error("config", f"agent={mode}", f"{key}=cahce", "limit=1")
    assert "cahce" in message and QA_AGENT[key] in message, message


@pytest.mark.parametrize("key", sorted(SHARED))
def test_run_benchmark_typo_fails_naming_the_allowed_values(key: str) -> None:
    message = _error("config", f"{key}=cahce", "limit=1")
    assert "cahce" in message and SHARED[key] in message, message


def _mode_error(*overrides: str) -> str:
    """The error of the registered-mode check every QA pipeline runs on the converted config before Ray
    (``medagent.agent.check_modes``, reached through ``needs_retrieval``)."""
    with pytest.raises(KeyError) as info:
        check_modes(_convert("config", *overrides).agent)
    return str(info.value)


@pytest.mark.parametrize("mode", AGENT_MODES)
def test_unregistered_agent_modes_fail_naming_the_registered_ones(mode: str) -> None:
    registered = ", ".join(AGENTS.names())
    assert registered in _mode_error(f"agent={mode}", "agent.mode=standalon")
    assert registered in _mode_error(f"agent={mode}", "agent.gate.tools_mode=ful")
    assert "cannot be 'gated'" in _error("config", f"agent={mode}", "agent.gate.tools_mode=gated")


@pytest.mark.parametrize("key", ["agent.loop.memory", "llm.backend"])
def test_run_suite_typo_fails(key: str) -> None:
    message = _error("run_suite", f"{key}=cahce")
    assert "cahce" in message and {**SHARED, **QA_AGENT}[key] in message, message


@pytest.mark.parametrize("agent", HISTORY_AGENTS)
@pytest.mark.parametrize("key", sorted(HISTORY_AGENT))
def test_run_interviews_typo_fails_naming_the_allowed_values(agent: str, key: str) -> None:
    message = _error("run_interviews", f"history_agent={agent}", f"agent.{key}=cahce")
    assert "cahce" in message and HISTORY_AGENT[key] in message, message


@pytest.mark.parametrize("key", ["llm.backend", "retriever.mode", "cluster.serve.proxy_location"])
def test_run_interviews_shared_typo_fails(key: str) -> None:
    assert SHARED[key] in _error("run_interviews", f"{key}=cahce")


@pytest.mark.parametrize("key", [*sorted(f"interview_sessions.agent.{k}" for k in HISTORY_AGENT), *SHARED])
def test_serve_typo_fails_naming_the_allowed_values(key: str) -> None:
    allowed = (
        HISTORY_AGENT.get(key.removeprefix("interview_sessions.agent."))
        if key.startswith("interview_")
        else SHARED[key]
    )
    message = _error("serve", "interview_sessions.enabled=true", f"{key}=cahce")
    assert "cahce" in message and allowed in message, message


def test_annotate_typo_fails_naming_the_allowed_values() -> None:
    assert "lexicon, llm" in _error("annotate_interviews", "annotator.kind=lexicn")
    assert SHARED["llm.backend"] in _error("annotate_interviews", "llm.backend=cahce")


@pytest.mark.parametrize("key", sorted(INDEX_JOB))
def test_index_corpus_typo_fails_naming_the_allowed_values(key: str) -> None:
    message = _error("index_corpus", "out_dir=/tmp/x", f"{key}=cahce")
    assert "cahce" in message and INDEX_JOB[key] in message, message


def test_index_configs_built_in_python_are_checked_too() -> None:
    with pytest.raises(ValueError, match="index.kind must be one of flat, ivfpq, hnsw, got 'hnws'"):
        IndexConfig(kind="hnws")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="embedder.metric must be one of l2, ip"):
        EmbedderConfig(metric="cos")  # type: ignore[arg-type]
    assert IndexConfig(kind="hnsw").kind == "hnsw"  # type: ignore[arg-type]


def test_configs_built_in_python_are_checked_too() -> None:
    with pytest.raises(
        ValueError,
        match="agent.loop.memory must be one of cache_prune, documents, context, none, got 'cahce'",
    ):
        agent_config(memory="cahce")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="agent.questioning.policy must be one of order, information"):
        history_agent_config(policy="informaton")  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="registered"):
        check_modes(agent_config(mode="standalon"))
    assert agent_config(memory="context").loop.memory is Memory.context  # type: ignore[arg-type]


def test_members_read_as_their_plain_values() -> None:
    from pipelines.benchmark_run import run_config

    cfg: RunConfig = _convert(
        "config", "agent=full", "agent.loop.memory=context", "llm.tool_calls=json_schema"
    )
    assert (
        cfg.agent.loop.memory == "context"
        and f"{cfg.agent.loop.memory}" == str(cfg.agent.loop.memory) == "context"
    )
    assert {"context": 1}[cfg.agent.loop.memory] == 1 and cfg.llm.backend in ("llamacpp",)
    config = run_config(cfg)  # what the manifest stores and a resume compares
    assert type(config["agent"]["loop"]["memory"]) is str and config["agent"]["loop"]["memory"] == "context"
    assert config["llm"]["backend"] == "llamacpp" and config["llm"]["tool_calls"] == "json_schema"
    assert config["cluster"]["serve"]["proxy_location"] == "EveryNode"
    assert json.loads(json.dumps(config)) == config
    yaml = OmegaConf.to_yaml(OmegaConf.structured(LLMConfig))  # .hydra/config.yaml spells values the same
    assert "backend: llamacpp" in yaml and "tool_choice: auto" in yaml
