"""recipe=paper: one switch sets every knob of the QA paper's method; what a run still changes is listed."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from medagent.config import RunConfig
from medagent.config.legacy import upgrade_config
from medagent.config.recipe import PAPER_METHOD, departures
from medagent.run import build_manifest
from pipelines.common import register_configs

CONF = Path(__file__).resolve().parents[2] / "conf"
register_configs()


def _compose(*overrides: str) -> dict[str, Any]:
    with initialize_config_dir(str(CONF), version_base=None):
        cfg = compose("config", overrides=list(overrides))
    run = OmegaConf.to_object(cfg)
    assert isinstance(run, RunConfig)
    config: dict[str, Any] = json.loads(json.dumps(asdict(run), default=str))
    return config


def _at(config: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        config = config[part]
    return config


PAPER_72B = ("recipe=paper", "agent=full", "llm=qwen2.5-72b-instruct", "llm.tensor_parallel_size=4",
             "llm.tool_calls=native")  # fmt: skip


def test_recipe_paper_sets_every_knob_of_the_method() -> None:
    c = _compose(*PAPER_72B, "benchmark=usmle_step2")
    for key, (want, _) in PAPER_METHOD.items():
        got = _at(c, key)
        assert str(got).rsplit(".", 1)[-1] == str(want) or got == want, key
    assert (c["agent"]["retrieval"]["top_k"], c["agent"]["retrieval"]["top_r"]) == (32, 32)
    assert c["agent"]["loop"]["batch_size"] == 4 and c["agent"]["loop"]["doc_max_chars"] == 3000
    assert c["retriever"]["mode"] == "dense" and c["retriever"]["top_k"] == 32
    assert c["reranker"]["name"] == "gte-qwen2-7b-4bit" and c["reranker"]["top_r"] == 32
    # The paper's item sets: a benchmark named as usual reads the paper's items.
    assert c["benchmark"] == {"name": "usmle_step2_paper", "loader": "usmle_step2_paper", "options": {}}
    assert c["recipe"] == {"name": "paper", "item_suffix": "_paper", "memory": "documents"}
    assert departures(c) == []
    index = {"embedder": {"name": "specter", "model": "allenai-specter"}, "sources": dict.fromkeys("abcdef")}
    assert departures(c, index) == []


def test_recipe_paper_on_cpu_stand_ins_lists_what_remains() -> None:
    c = _compose("recipe=paper", "agent=full", "llm=qwen2.5-coder-1.5b-cpu", "reranker=mpnet-cpu",
                 "benchmark=medexpqa", "limit=5")  # fmt: skip
    assert c["benchmark"]["loader"] == "medexpqa_paper" and c["reranker"]["top_r"] == 32
    index = {"embedder": {"name": "minilm", "model": "all-MiniLM-L6-v2"}, "sources": {"medquad": {}}}
    found = departures(c, index)
    assert [d.split(":")[0] for d in found] == [
        "llm", "llm.tool_calls", "reranker.name", "reranker.load_in_4bit", "index embedder", "index sources",
        "limit",
    ]  # fmt: skip


def test_default_recipe_keeps_merged_sets_and_names_its_departures() -> None:
    c = _compose("agent=full", "benchmark=usmle_step1")
    assert c["benchmark"]["loader"] == "usmle_step1" and c["recipe"]["name"] == "default"
    keys = {d.split(":")[0] for d in departures(c)}
    assert {"agent.loop.memory", "agent.loop.feedback", "agent.answer.constrained_answer",
            "agent.answer.retry_invalid", "agent.retrieval.top_k", "retriever.mode", "benchmark.loader"} <= keys  # fmt: skip
    # A standalone run never reads the search or loop settings, so they are not its departures.
    standalone = {d.split(":")[0] for d in departures(_compose("benchmark=usmle_step1_paper"))}
    assert not any(
        k.startswith(("agent.loop", "agent.retrieval", "retriever", "reranker")) for k in standalone
    )


def test_manifest_records_departures_and_old_configs_read_as_default_recipe(tmp_path: Path) -> None:
    m = build_manifest({"a": 1}, [], None, departures=["llm: x"])
    assert m["departures"] == ["llm: x"]
    assert "departures" not in build_manifest({"a": 1}, [])
    old = _compose("agent=full")
    del old["recipe"], old["agent"]["loop"]["feedback"]
    assert upgrade_config(old) == _compose("agent=full")


def test_table1_open_baselines_is_one_experiment_and_paper_recipe_names_paper_items() -> None:
    from pipelines.run_suite import deployment_groups, plan_from_overrides

    with initialize_config_dir(str(CONF), version_base=None):
        _, cells = plan_from_overrides(["experiment=table1_open_baselines", "recipe=paper", "limit=3"])
    assert len(cells) == 25 and {c.cfg.agent.mode for c in cells} == {"standalone"}
    assert {c.cfg.llm.name for c in cells} == {
        "biomistral-7b", "openbiollm-8b", "openbiollm-70b", "ultramedical-8b", "ultramedical-70b"}  # fmt: skip
    assert {c.cfg.benchmark.loader for c in cells} == {
        "usmle_step1_paper", "usmle_step2_paper", "usmle_step3_paper", "medqa_paper", "medexpqa_paper"}  # fmt: skip
    assert all(
        str(c.cfg.run_dir).endswith(f"{c.cfg.llm.name}/{c.cfg.benchmark.name}-standalone") for c in cells
    )
    assert len(deployment_groups(cells)) == 5  # each LLM deployed once for its five benchmarks


def test_recipe_paper_keeps_each_ablations_own_memory() -> None:
    memory = {mode: _compose("recipe=paper", f"agent={mode}")["agent"]["loop"]["memory"]
              for mode in ("full", "no_cache_prune", "no_search", "gated")}  # fmt: skip
    assert memory == {"full": "documents", "no_cache_prune": "context", "no_search": "none", "gated": None}
    assert _compose("agent=full")["agent"]["loop"]["memory"] == "cache_prune"


def test_the_gated_agent_under_the_paper_recipe_names_its_gate_and_its_tools_memory() -> None:
    found = departures(_compose(*PAPER_72B, "agent=gated", "benchmark=usmle_step2"))
    # Its tools part takes full's own bank (loop.memory null), not the recipe's: both are departures.
    assert [d.split(":")[0] for d in found] == ["agent.mode", "agent.loop.memory"]
    assert "'cache_prune'" in found[1]
    found = departures(
        _compose(*PAPER_72B, "agent=gated", "agent.loop.memory=documents", "benchmark=usmle_step2")
    )
    assert [d.split(":")[0] for d in found] == ["agent.mode"]
    # A gate over an ablation keeps that ablation's bank, as the ablation itself does.
    ablation = _compose(
        *PAPER_72B, "agent=gated", "agent.gate.tools_mode=no_cache_prune", "benchmark=usmle_step2"
    )
    assert [d.split(":")[0] for d in departures(ablation)] == ["agent.mode"]
