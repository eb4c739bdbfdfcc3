"""The placement check's arithmetic: the paper's node holds the paper's LLM with retrieval beside it; what a
cluster cannot hold is named, GPU by GPU and byte by byte."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from actors.deploy import Needs
from actors.gpu_llm import vllm_llm_kwargs
from actors.placement import (
    Demand,
    NodeCapacity,
    llm_gpu_memory,
    place,
    placement_problems,
)
from medagent.config import RerankerConfig, RetrieverConfig, RunConfig
from pipelines.common import register_configs

CONF = Path(__file__).resolve().parents[2] / "conf"
GIB = 1024**3


def _run(*overrides: str) -> RunConfig:
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg: RunConfig = OmegaConf.to_object(compose(config_name="config", overrides=list(overrides)))  # type: ignore[assignment]
    return cfg


def _needs(cfg: RunConfig, *, search: bool = True, scoring: bool = False) -> Needs:
    return Needs(
        cfg.llm,
        cfg.cluster,
        RetrieverConfig() if search else None,
        RerankerConfig() if search else None,
        index_dir="/x",
        scoring=cfg.open_scoring if scoring else None,
    )


def _node(cpus: float = 32, gpus: float = 4, **custom: float) -> NodeCapacity:
    return NodeCapacity.of("node1", {"CPU": cpus, "GPU": gpus, "memory": 256 * GIB, **custom})


def test_paper_node_l40s_holds_the_awq_model_with_retrieval_beside_it() -> None:
    cfg = _run("cluster=paper_node_l40s", "llm=qwen2.5-72b-instruct-awq")
    assert placement_problems(_needs(cfg), [_node()]) == []
    m = llm_gpu_memory(cfg.llm, cfg.cluster)
    assert m is not None and m.fits
    # 41.5 GB / 4 = 10.4 GB of weights per GPU; 38.4 - 10.4 - 2 = 26 GB of KV cache per GPU.
    assert m.weights_gb == pytest.approx(10.375) and m.kv_room_gb == pytest.approx(26.025)


def test_paper_node_l40s_refuses_bf16_weights_by_memory() -> None:
    cfg = _run("cluster=paper_node_l40s", "llm=qwen2.5-72b-instruct")
    [problem] = placement_problems(_needs(cfg), [_node()])
    assert "does not fit paper_node_l40s's 48 GB GPUs" in problem and "36.4 GB of weights" in problem


def test_paper_node_80gb_holds_bf16_with_the_papers_scoring_models() -> None:
    cfg = _run(
        "cluster=paper_node_80gb", "llm=qwen2.5-72b-instruct", "scoring=gpu", "open_scoring.num_gpus=0.45"
    )
    assert placement_problems(_needs(cfg, scoring=True), [_node()]) == []
    whole = replace(cfg.open_scoring, num_gpus=1.0)
    [problem] = placement_problems(replace(_needs(cfg, scoring=True), scoring=whole), [_node()])
    assert problem.startswith("open-ended scoring actor needs {CPU: 2, GPU: 1, memory: 48.0 GiB}")
    assert "free per GPU: 0.45, 0.45, 0.45, 0.45" in problem


def test_tp4_on_single_gpu_is_refused_naming_the_gpus() -> None:
    cfg = _run("cluster=single_gpu", "llm=qwen2.5-72b-instruct")
    problems = placement_problems(_needs(cfg, search=False), [_node(gpus=1)])
    assert len(problems) == 1
    assert problems[0].startswith(
        "LLM replica 1 (qwen2.5-72b-instruct: TP 4 x PP 1) needs {GPU: 1, CPU: 1} + {GPU: 1} + {GPU: 1} + "
        "{GPU: 1} on one node: node1 lacks GPU 4 (has 1)"
    )


def test_single_gpu_holds_a_model_that_fits_one_gpu() -> None:
    cfg = _run("cluster=single_gpu", "llm=qwen2.5-7b-instruct")
    assert placement_problems(_needs(cfg, search=False), [_node(gpus=1)]) == []


def test_whole_gpu_tp_workers_leave_no_share_for_a_fractional_reranker() -> None:
    # Four logical GPUs in total would hold 4 + 0.5 + 0.25 by sum; a fraction must fit in one GPU.
    cfg = _run("cluster=paper_node_l40s", "llm=qwen2.5-72b-instruct-awq", "cluster.llm.bundle={GPU: 1}")
    problems = placement_problems(_needs(cfg), [_node()])
    assert [p.split(" needs ")[0] for p in problems] == ["Reranker replica 1", "Retriever replica 1"]


def test_custom_resources_no_node_advertises_are_named() -> None:
    cfg = _run("cluster=multi_gpu", "llm=qwen2.5-72b-instruct")
    problems = placement_problems(_needs(cfg), [_node()])
    assert any("lacks llm_node 0.04 (has 0)" in p for p in problems)
    assert any(p.startswith("Reranker replica 1") and "retrieval_node 0.01 (has 0)" in p for p in problems)


def test_strict_pack_bundles_stay_on_one_node_and_loose_ones_spread() -> None:
    two = [NodeCapacity.of("a", {"GPU": 2}), NodeCapacity.of("b", {"GPU": 2})]
    bundles = tuple({"GPU": 1.0} for _ in range(4))
    assert place([Demand("packed", bundles, same_node=True)], two) != []
    assert place([Demand("spread", bundles, same_node=False)], two) == []


def test_fractions_pack_onto_the_fullest_gpu() -> None:
    node = NodeCapacity.of("n", {"GPU": 2})
    wanted = [Demand("a", ({"GPU": 0.5},)), Demand("b", ({"GPU": 0.5},)), Demand("whole", ({"GPU": 1.0},))]
    assert place(wanted, [node]) == []


def test_sim_paper_node_keeps_the_papers_shares() -> None:
    sim, real = _run("cluster=sim_paper_node").cluster, _run("cluster=paper_node_l40s").cluster
    assert asdict(sim.retrieval) == asdict(real.retrieval)
    assert (
        sim.workers.num_cpus == real.workers.num_cpus
        and sim.serve.ingress_num_cpus == real.serve.ingress_num_cpus
    )
    assert sim.ray.num_gpus == 4 and sim.llm.bundle == {"CPU": 1}


def test_fractional_bundle_tells_vllm_its_worker_share() -> None:
    cfg = _run("cluster=paper_node_l40s", "llm=qwen2.5-72b-instruct-awq")
    kwargs = vllm_llm_kwargs(cfg.llm, cfg.cluster, source="/m")
    assert kwargs["runtime_env"] == {"env_vars": {"VLLM_RAY_PER_WORKER_GPUS": "0.8"}}
    assert kwargs["engine_kwargs"]["gpu_memory_utilization"] == 0.8
    assert kwargs["placement_group_config"]["bundle_per_worker"] == {"GPU": 0.8}
    whole = _run("cluster=single_gpu", "llm=qwen2.5-7b-instruct")
    assert "runtime_env" not in vllm_llm_kwargs(whole.llm, whole.cluster, source="/m")


def test_the_engines_environment_reaches_its_processes() -> None:
    cfg = _run(
        "cluster=paper_node_l40s", "llm=qwen2.5-72b-instruct-awq", "+llm.engine_env.VLLM_LOGGING_LEVEL=DEBUG"
    )
    env = vllm_llm_kwargs(cfg.llm, cfg.cluster, source="/m")["runtime_env"]["env_vars"]
    assert env == {"VLLM_RAY_PER_WORKER_GPUS": "0.8", "VLLM_LOGGING_LEVEL": "DEBUG"}
    cpu = _run(
        "cluster=local", "llm=smollm2-135m-vllm-cpu", "+llm.engine_env.VLLM_CPU_OMP_THREADS_BIND=nobind"
    )
    kwargs = vllm_llm_kwargs(cpu.llm, cpu.cluster, source="/m")
    assert kwargs["runtime_env"] == {"env_vars": {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}}


def test_sim_multi_node_places_the_open_ended_suite_whatever_order_ray_lists_its_nodes() -> None:
    # The scoring actor (1 GPU) fits on the retrieval node or the LLM node; the retriever and reranker
    # only on the retrieval node. Placing the scoring actor first on whichever node Ray listed first
    # took the retrieval node's only GPU.
    from itertools import permutations

    cfg = _run(
        "cluster=sim_multi_node",
        "llm=smollm2-135m-vllm-cpu",
        "experiment=table2_open_ended",
        "open_scoring.num_gpus=1",
    )
    nodes = [
        NodeCapacity.of("retrieval", {"CPU": 4, "GPU": 1, "retrieval_node": 1, "memory": 8 * GIB}),
        NodeCapacity.of("llm", {"CPU": 4, "GPU": 4, "llm_node": 1, "memory": 8 * GIB}),
        NodeCapacity.of("cpu", {"CPU": 4, "memory": 8 * GIB}),
        NodeCapacity.of("head", {"CPU": 0, "memory": 4 * GIB}),
    ]
    for order in permutations(nodes):
        assert placement_problems(_needs(cfg, scoring=True), list(order)) == [], [n.name for n in order]
