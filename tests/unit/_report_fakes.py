"""Synthetic run directories for the report tests, written with the real ``RunDir``.

Benchmark ``b1`` has golds q1..q5 (answers A..E, option text ``text-<letter>``). Each run answers some ids;
a trace is a list of tool names (plus the answer step), or None for no trace file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from medagent.config import BenchmarkConfig, LLMConfig, RunConfig
from medagent.run import RunDir
from medagent.types import Gold, Prediction
from tests.configs import agent_config

GOLD_LETTERS = {"q1": "A", "q2": "B", "q3": "C", "q4": "D", "q5": "E"}


def golds(ids: Sequence[str] = tuple(GOLD_LETTERS)) -> list[Gold]:
    return [Gold(id=i, answer=GOLD_LETTERS[i], answer_text=f"text-{GOLD_LETTERS[i]}") for i in ids]


def trace_of(tools: Sequence[str]) -> list[dict[str, Any]]:
    """Agent-style steps: a model turn, one step per tool call, an observation, and the answer."""
    steps: list[dict[str, Any]] = [{"step": 0, "kind": "model", "prompt_tokens": 50, "completion_tokens": 5}]
    for t in tools:
        steps.append({"step": len(steps), "kind": "tool", "tool": t, "ok": True, "llm_calls": 1})
    steps.append({"step": len(steps), "kind": "observation", "error": "no_answer"})
    steps.append({"step": len(steps), "kind": "tool", "tool": "final_answer", "ok": True})
    return steps


def make_run(
    root: Path,
    name: str,
    *,
    mode: str,
    answers: dict[str, str],
    benchmark: str = "b1",
    top_r: int = 32,
    open_ended: bool = False,
    llm: str = "fake-llm",
    traces: Mapping[str, Sequence[str] | None] | None = None,
    errors: Sequence[str] = (),
    gold_ids: Sequence[str] | None = None,
    usage: dict[str, int] | None = None,
    latency_s: float = 2.0,
    metrics: dict[str, Any] | None = None,
) -> Path:
    """Writes one run directory (manifest with the full RunConfig, golds, predictions, traces)."""
    rd = RunDir(root / name)
    cfg = RunConfig(
        benchmark=BenchmarkConfig(name=benchmark, loader=benchmark),
        agent=agent_config(mode=mode, top_r=top_r, open_ended=open_ended),
        llm=LLMConfig(name=llm),
    )
    rd.write_json(rd.manifest, {"config": asdict(cfg), "git_sha": None})
    rd.write_golds(golds(gold_ids or list(answers)))
    preds = []
    for qid, answer in answers.items():
        tools = (traces or {}).get(qid)
        preds.append(
            Prediction(
                id=qid,
                benchmark=benchmark,
                answer="INVALID" if qid in errors else answer,
                error="RuntimeError: boom" if qid in errors else None,
                trace=trace_of(tools) if tools is not None else [],
                usage=dict(usage or {"prompt_tokens": 100, "completion_tokens": 10}),
                latency_s=latency_s,
            )
        )
    rd.append_predictions(preds)
    for qid in answers:
        if traces is None or traces.get(qid) is None:
            rd.trace_path(qid).unlink()  # no trace for this question
    if metrics is not None:
        rd.write_json(rd.metrics, metrics)
    return rd.root


class TableEmbedder:
    """Looks texts up in a fixed table of vectors (unknown texts: the zero vector)."""

    def __init__(self, vectors: dict[str, Sequence[float]]) -> None:
        self.vectors = {k: np.asarray(v, dtype=np.float32) for k, v in vectors.items()}
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        dim = len(next(iter(self.vectors.values())))
        return np.stack([self.vectors.get(t, np.zeros(dim, dtype=np.float32)) for t in texts])


class ConstantPairScorer:
    def __init__(self, value: float) -> None:
        self.value = value
        self.pairs: list[tuple[str, str]] = []

    def score(self, candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        self.pairs += list(zip(candidates, references, strict=True))
        return [self.value] * len(candidates)
