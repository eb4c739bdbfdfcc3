"""The LLM through ``ray.serve.llm``'s OpenAI route vs the same vLLM engine in-process, same requests.

Run: ``python benchmarks/bench_serve_llm.py [--llm smollm2-135m-vllm-cpu] [--requests 16] [--concurrency 8]``.
Both sides get the same chat prompts (a medical question each), greedy, with a fixed output length
(``ignore_eos``), ``--concurrency`` in flight:
  * in-process: ``vllm.v1.engine.async_llm.AsyncLLM`` built from the same engine arguments the Serve
    deployment gets (``actors.gpu_llm.vllm_llm_kwargs``), prompts rendered by the model's chat template;
  * Serve: the product's deployment (``pipelines.common.run_llm_app``, the pipelines' own code path) on a
    local Ray cluster (``conf/cluster/local.yaml``), called over HTTP with aiohttp as the agents call it.
Both engines stay up in this process and the timed rounds alternate (in-process, then Serve), so a change
in the machine's load hits both sides alike and neither runs while the other is timed. Prints completion
tokens/s of each per round and the ratio Serve ÷ in-process (median over rounds; target ≥ 0.8).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

QUESTIONS = [
    "What is the first-line treatment for uncomplicated hypertension?",
    "Which drug is a P2Y12 inhibitor used after coronary stenting?",
    "What are the classic symptoms of diabetic ketoacidosis?",
    "How is community-acquired pneumonia diagnosed?",
    "What causes iron-deficiency anemia in older adults?",
    "Which vaccine is recommended for adults over 65?",
    "What is the mechanism of action of metformin?",
    "What are the warning signs of a stroke?",
]


def _compose(llm: str) -> Any:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from pipelines.common import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return OmegaConf.to_object(compose(config_name="config", overrides=[f"llm={llm}", "cluster=local"]))


def _messages(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)] + f" (case {i})"}]


def _engine(engine_kwargs: dict[str, Any], model: str) -> Any:
    from vllm import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    # The deployment's engine kwargs minus the OpenAI server's own (tool parser, auto tool choice), which
    # ray.serve.llm hands to its frontend, not to the engine.
    names = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    kwargs = {k: v for k, v in engine_kwargs.items() if k in names}
    if isinstance(kwargs.get("structured_outputs_config"), dict):
        from vllm.config import StructuredOutputsConfig

        kwargs["structured_outputs_config"] = StructuredOutputsConfig(**kwargs["structured_outputs_config"])
    return AsyncLLM.from_engine_args(AsyncEngineArgs(model=model, **kwargs))


async def _in_process_round(
    engine: Any, tokenizer: Any, ids: range, conc: int, max_tokens: int
) -> tuple[float, int]:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> int:
        prompt = tokenizer.apply_chat_template(_messages(i), tokenize=False, add_generation_prompt=True)
        async with sem:
            final = None
            async for out in engine.generate(prompt, params, request_id=f"r{i}-{time.monotonic_ns()}"):
                final = out
            assert final is not None
            return len(final.outputs[0].token_ids)

    start = time.perf_counter()
    tokens = sum(await asyncio.gather(*(one(i) for i in ids)))
    return time.perf_counter() - start, tokens


async def _serve_round(
    http: Any, url: str, served: str, ids: range, conc: int, max_tokens: int
) -> tuple[float, int]:
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> int:
        body = {"model": served, "messages": _messages(i), "temperature": 0.0, "max_tokens": max_tokens,
                "ignore_eos": True}  # fmt: skip
        async with sem, http.post(f"{url}/chat/completions", json=body) as r:
            data = await r.json()
            if r.status != 200:
                raise RuntimeError(f"HTTP {r.status}: {data}")
            return int(data["usage"]["completion_tokens"])

    start = time.perf_counter()
    tokens = sum(await asyncio.gather(*(one(i) for i in ids)))
    return time.perf_counter() - start, tokens


async def _bench(args: argparse.Namespace) -> None:
    import statistics

    import aiohttp
    from transformers import AutoTokenizer

    from actors.backends import llm_endpoint
    from actors.gpu_llm import model_source, vllm_llm_kwargs
    from pipelines.common import ray_session, run_llm_app

    cfg = _compose(args.llm)
    source = model_source(cfg.llm)
    engine_kwargs = dict(vllm_llm_kwargs(cfg.llm, cfg.cluster, source)["engine_kwargs"])
    n, conc, mt = args.requests, args.concurrency, args.max_tokens
    print(f"model {cfg.llm.name} ({source}); {args.rounds} rounds of {n} requests, {conc} concurrent, {mt} "
          "tokens each; in-process and Serve alternate, one idle while the other runs", flush=True)  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(source)
    engine = _engine(engine_kwargs, source)
    try:
        await _in_process_round(engine, tokenizer, range(-conc, 0), conc, mt)  # warm-up, not timed
        with ray_session(cfg.cluster):
            start = time.perf_counter()
            run_llm_app(cfg.llm, cfg.cluster)
            print(f"ray.serve.llm application up in {time.perf_counter() - start:.0f}s", flush=True)
            url = llm_endpoint(cfg.llm, cfg.cluster).base_url
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1800)) as http:
                await _serve_round(http, url, cfg.llm.served_name, range(-conc, 0), conc, mt)
                ratios = []
                for r in range(args.rounds):
                    ids = range(r * n, (r + 1) * n)
                    base_s, base_tok = await _in_process_round(engine, tokenizer, ids, conc, mt)
                    serve_s, serve_tok = await _serve_round(http, url, cfg.llm.served_name, ids, conc, mt)
                    base, served = base_tok / base_s, serve_tok / serve_s
                    ratios.append(served / base)
                    print(f"round {r + 1}: in-process {base:.1f} tokens/s ({base_tok} in {base_s:.1f}s), "
                          f"ray.serve.llm route {served:.1f} tokens/s ({serve_tok} in {serve_s:.1f}s), "
                          f"ratio {served / base:.2f}", flush=True)  # fmt: skip
    finally:
        engine.shutdown()
    print(f"ratio Serve / in-process: median {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})  (target >= 0.8)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--llm", default="smollm2-135m-vllm-cpu", help="a conf/llm config with backend vllm")
    ap.add_argument("--requests", type=int, default=16, help="requests per round")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64, help="completion tokens per request (fixed)")
    ap.add_argument("--rounds", type=int, default=3)
    asyncio.run(_bench(ap.parse_args()))


if __name__ == "__main__":  # vLLM spawns its engine process
    main()
