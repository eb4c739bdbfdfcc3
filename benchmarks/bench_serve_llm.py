"""The LLM through ``ray.serve.llm``'s OpenAI route vs the same vLLM engine in-process, same requests.

Run: ``python benchmarks/bench_serve_llm.py [--llm smollm2-135m-vllm-cpu] [--requests 16] [--concurrency 8]``.
Both sides get the same chat prompts (a medical question each), greedy, with a fixed output length
(``ignore_eos``), ``--concurrency`` in flight:
  * in-process: ``vllm.v1.engine.async_llm.AsyncLLM`` built from the same engine arguments the Serve
    deployment gets (``actors.gpu_llm.vllm_llm_kwargs``), prompts rendered by the model's chat template;
  * Serve: the product's deployment (``pipelines.common.run_llm_app``, the pipelines' own code path) on a
    local Ray cluster (``conf/cluster/local.yaml``), called over HTTP with aiohttp as the agents call it.
Prints completion tokens/s for each and the ratio Serve ÷ in-process (target ≥ 0.8). The baseline runs
first, in this process, and is shut down before the cluster starts, so the two never share the cores.
"""

from __future__ import annotations

import argparse
import asyncio
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


async def _in_process(
    engine_kwargs: dict[str, Any], model: str, n: int, conc: int, max_tokens: int
) -> tuple[float, int]:
    from transformers import AutoTokenizer
    from vllm import AsyncEngineArgs, SamplingParams
    from vllm.v1.engine.async_llm import AsyncLLM

    tokenizer = AutoTokenizer.from_pretrained(model)
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=model, **engine_kwargs))
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> int:
        prompt = tokenizer.apply_chat_template(_messages(i), tokenize=False, add_generation_prompt=True)
        async with sem:
            final = None
            async for out in engine.generate(prompt, params, request_id=f"r{i}"):
                final = out
            assert final is not None
            return len(final.outputs[0].token_ids)

    try:
        await one(-1)  # warm-up, not timed
        start = time.perf_counter()
        tokens = sum(await asyncio.gather(*(one(i) for i in range(n))))
        return time.perf_counter() - start, tokens
    finally:
        engine.shutdown()


async def _through_serve(url: str, served: str, n: int, conc: int, max_tokens: int) -> tuple[float, int]:
    import aiohttp

    sem = asyncio.Semaphore(conc)

    async def one(http: aiohttp.ClientSession, i: int) -> int:
        body = {"model": served, "messages": _messages(i), "temperature": 0.0, "max_tokens": max_tokens,
                "ignore_eos": True}  # fmt: skip
        async with sem, http.post(f"{url}/chat/completions", json=body) as r:
            data = await r.json()
            if r.status != 200:
                raise RuntimeError(f"HTTP {r.status}: {data}")
            return int(data["usage"]["completion_tokens"])

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1800)) as http:
        await one(http, -1)
        start = time.perf_counter()
        tokens = sum(await asyncio.gather(*(one(http, i) for i in range(n))))
        return time.perf_counter() - start, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llm", default="smollm2-135m-vllm-cpu", help="a conf/llm config with backend vllm")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64, help="completion tokens per request (fixed)")
    args = ap.parse_args()

    from actors.builder import llm_endpoint
    from actors.gpu_llm import model_source, vllm_llm_kwargs
    from pipelines.common import ray_session, run_llm_app

    cfg = _compose(args.llm)
    source = model_source(cfg.llm)
    engine_kwargs = dict(vllm_llm_kwargs(cfg.llm, cfg.cluster, source)["engine_kwargs"])
    n, conc, mt = args.requests, args.concurrency, args.max_tokens
    print(f"model {cfg.llm.name} ({source}); {n} requests, {conc} concurrent, {mt} tokens each", flush=True)

    base_s, base_tok = asyncio.run(_in_process(engine_kwargs, source, n, conc, mt))
    base = base_tok / base_s
    print(f"in-process AsyncLLM : {base_tok} tokens in {base_s:.1f}s = {base:.1f} tokens/s", flush=True)

    with ray_session(cfg.cluster):
        start = time.perf_counter()
        run_llm_app(cfg.llm, cfg.cluster)
        print(f"ray.serve.llm application up in {time.perf_counter() - start:.0f}s", flush=True)
        url = llm_endpoint(cfg.llm, cfg.cluster)["base_url"]
        serve_s, serve_tok = asyncio.run(_through_serve(url, cfg.llm.served_name, n, conc, mt))
    served = serve_tok / serve_s
    print(f"ray.serve.llm route  : {serve_tok} tokens in {serve_s:.1f}s = {served:.1f} tokens/s")
    print(f"ratio Serve / in-process: {served / base:.2f}  (target >= 0.8)")


if __name__ == "__main__":  # vLLM spawns its engine process
    main()
