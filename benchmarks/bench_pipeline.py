"""Questions/s of the Ray pipeline vs the same questions answered in one plain process, same model.

Run: ``python benchmarks/bench_pipeline.py [--llm qwen2.5-coder-1.5b-cpu] [--n 16] [--benchmark medqa]``

Three measurements in one process, on the same questions and the same GGUF model:
  1. plain, sequential   -- one llama.cpp engine in this process, one question at a time (the baseline);
  2. plain, concurrent   -- the same engine with as many questions in flight as it has slots;
  3. Ray pipeline        -- Ray Data -> AgentWorker actors -> Serve deployment (as ``run_benchmark``).
Model loading and Ray/Serve start-up are timed separately and excluded from questions/s. Machines
here are noisy: read the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from actors.deploy import needs_for_benchmark  # noqa: E402
from medagent.agent import build_agent  # noqa: E402
from medagent.agent.services import AgentDeps  # noqa: E402
from medagent.config import RunConfig  # noqa: E402
from medagent.data import load_benchmark  # noqa: E402
from medagent.llm.llamacpp import LlamaCppEngine, LlamaCppSettings  # noqa: E402
from medagent.models import resolve_model  # noqa: E402
from medagent.types import Prediction, Question  # noqa: E402
from pipelines.benchmark_run import stream_predictions  # noqa: E402
from pipelines.common import (  # noqa: E402
    deploy,  # noqa: E402
    ray_session,
    register_configs,
)


def _config(args: argparse.Namespace) -> RunConfig:
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[f"llm={args.llm}", f"benchmark={args.benchmark}", *args.overrides],
        )
    run_cfg: RunConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    run_cfg.progress = False
    return run_cfg


async def _plain(
    engine: LlamaCppEngine, cfg: RunConfig, questions: list[Question], in_flight: int
) -> list[Prediction]:
    agent = build_agent(cfg.agent, engine, AgentDeps(json_schema=cfg.llm.supports_json_schema))
    sem = asyncio.Semaphore(in_flight)

    async def one(q: Question) -> Prediction:
        async with sem:
            return await agent.answer(q)

    return list(await asyncio.gather(*(one(q) for q in questions)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--llm", default="qwen2.5-coder-1.5b-cpu", help="a conf/llm/ entry with backend=llamacpp"
    )
    parser.add_argument("--benchmark", default="medqa")
    parser.add_argument("--n", type=int, default=16, help="questions per measurement")
    parser.add_argument(
        "overrides", nargs="*", help="extra hydra overrides, e.g. cluster.workers.batch_size=8"
    )
    args = parser.parse_args()
    cfg = _config(args)
    loaded = [q for q, _ in load_benchmark(cfg.benchmark.loader, cfg.data_root, limit=args.n + 1).pairs]
    # Warm-ups use a question outside the measured set: llama.cpp keeps a RAM cache of past prompts,
    # so each mode also gets a fresh engine (reusing one would let later modes skip prefill).
    warm, questions = loaded[-1:], loaded[:-1]
    rows: list[tuple[str, float, int]] = []
    load_s = 0.0
    plain_modes = (("plain, sequential", 1), (f"plain, {cfg.llm.n_parallel} in flight", cfg.llm.n_parallel))
    for label, in_flight in plain_modes:
        t0 = time.perf_counter()
        engine = LlamaCppEngine(
            resolve_model(cfg.llm.model.spec()),
            LlamaCppSettings(n_ctx=cfg.llm.n_ctx, n_parallel=cfg.llm.n_parallel, n_threads=cfg.llm.n_threads),
            name=cfg.llm.served_name,
        )
        load_s = time.perf_counter() - t0
        asyncio.run(_plain(engine, cfg, warm, 1))
        t = time.perf_counter()
        preds = asyncio.run(_plain(engine, cfg, questions, in_flight))
        rows.append(
            (label, len(preds) / (time.perf_counter() - t), sum(p.answer != "INVALID" for p in preds))
        )
        del engine

    with ray_session(cfg.cluster):
        t = time.perf_counter()
        endpoints = deploy(needs_for_benchmark(cfg))
        startup_s = time.perf_counter() - t
        list(stream_predictions(cfg, warm, endpoints))
        t = time.perf_counter()
        preds = [p for batch in stream_predictions(cfg, questions, endpoints) for p in batch]
        rows.append(
            (
                "Ray pipeline",
                len(preds) / (time.perf_counter() - t),
                sum(p.answer != "INVALID" for p in preds),
            )
        )

    base = rows[0][1]
    print(
        f"\nmodel {cfg.llm.name}, {len(questions)} {cfg.benchmark.name} questions, "
        f"batch_size={cfg.cluster.workers.batch_size}, workers={cfg.cluster.workers.count}, "
        f"max_concurrency={cfg.agent.max_concurrency}"
    )
    print(f"in-process model load {load_s:.1f}s; Ray + Serve start-up (Ray init excluded) {startup_s:.1f}s\n")
    print(f"{'mode':<24} {'questions/s':>12} {'÷ baseline':>11} {'valid':>6}")
    for label, qps, valid in rows:
        print(f"{label:<24} {qps:>12.3f} {qps / base:>11.2f} {valid:>6}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory():
        main()
