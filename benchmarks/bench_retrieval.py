"""Retrieval through Ray Serve vs the same searches in-process, on the same index.

Run: ``python benchmarks/bench_retrieval.py --index-dir outputs/index/cpu_default [--requests 400]``
(``make index`` builds that index). Prints, in one run:
  * queries/s and p50/p99 latency of ``POST /v1/retrieve`` at 1, 8 and 32 concurrent clients;
  * the same queries searched in-process, one at a time, with the same ``Searcher`` (the baseline), at the
    node's thread count and at the replica's, each paired in time with Serve at 1 client (``--repeats``);
  * ratios: Serve queries/s ÷ in-process queries/s, and the p50 latency Serve adds at 1 client against
    both baselines (against the replica's thread count it is Serve's own cost), with the time inside the
    replica and the hops around it;
  * a bounded loopback load test: 1,000 requests at 32 concurrent (server errors must be 0) and the bad
    requests of the API contract, each of which must get a 4xx.
Targets (issue 5): ratio ≥ 0.5 at 32 concurrent; added p50 ≤ 10 ms at 1 client. Noisy machines: read ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from medagent.config import ClusterConfig, ClusterServeConfig, RayInitConfig, RetrieverConfig  # noqa: E402
from medagent.retrieval.search import MODES, Searcher  # noqa: E402
from pipelines.common import ray_session  # noqa: E402

TOP_K = 8
BAD = [
    ({}, 422), ({"query": ""}, 422), ({"query": "x" * 5000}, 422), ({"query": "a", "top_k": 10**6}, 422),
    ({"query": "a", "sources": ["nejm"]}, 400), ({"query": "a", "mode": "psychic"}, 422),
]  # fmt: skip


def _queries(n: int) -> list[str]:
    topics = ["asthma", "diabetes", "hypertension", "cystic fibrosis", "migraine", "anemia", "gout", "lupus"]
    asks = ["symptoms of", "treatment for", "causes of", "diagnosis of", "genetics of"]
    return [f"{asks[i % len(asks)]} {topics[(i // len(asks)) % len(topics)]} case {i}" for i in range(n)]


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


async def _through_serve(
    url: str, queries: list[str], concurrency: int
) -> tuple[float, list[float], list[int]]:
    # aiohttp, the client the product's own callers use (medagent.llm.openai_client, the agent's
    # services), so the client's own cost is the one our callers pay; httpx's async pool measured about
    # twice the call latency at 64 in flight (bench_agent) and would be charged to Serve here.
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    lat: list[float] = []
    codes: list[int] = []
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:

        async def one(q: str) -> None:
            async with sem:
                t = time.perf_counter()
                async with client.post(f"{url}/v1/retrieve", json={"query": q, "top_k": TOP_K}) as r:
                    await r.read()
                    lat.append(time.perf_counter() - t)
                    codes.append(r.status)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(q) for q in queries))
        return len(queries) / (time.perf_counter() - t0), lat, codes


async def _through_handle(handle: Any, queries: list[str], concurrency: int) -> tuple[float, list[float]]:
    sem = asyncio.Semaphore(concurrency)
    lat: list[float] = []

    async def one(q: str) -> None:
        async with sem:
            t = time.perf_counter()
            await handle.retrieve.remote({"query": q, "top_k": TOP_K})
            lat.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(q) for q in queries))
    return len(queries) / (time.perf_counter() - t0), lat


def _in_process(searcher: Searcher, queries: list[str], mode: str, threads: int) -> tuple[float, list[float]]:
    """The baseline: the same searches and document lookups, sequential, in this process with ``threads``
    torch and FAISS threads; returns (queries/s, latencies)."""
    import faiss
    import torch

    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)
    lat = []
    t0 = time.perf_counter()
    for i, q in enumerate(queries):
        t = time.perf_counter()
        ranked = searcher.search({str(i): q}, top_k=TOP_K, mode=mode)[str(i)]
        searcher.documents(list(ranked))  # the Serve route returns the documents too: same work
        lat.append(time.perf_counter() - t)
    return len(queries) / (time.perf_counter() - t0), lat


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--index-dir", default=str(REPO / "outputs/index/cpu_default"))
    parser.add_argument("--requests", type=int, default=400, help="requests per concurrency level")
    parser.add_argument(
        "--retriever-threads",
        type=int,
        default=None,
        help="torch threads of the replica (cluster.retrieval.retriever_threads; default: the config's)",
    )
    parser.add_argument(
        "--worker-niceness",
        type=int,
        default=None,
        help="RAY_worker_niceness for the Ray workers (default: the product's ray_session)",
    )
    parser.add_argument(
        "--serve-same-loop",
        type=int,
        choices=(0, 1),
        default=None,
        help="cluster.serve.same_loop: the replicas' request path on their own event loop (default: the config's)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default=RetrieverConfig().mode,
        help="search mode of both sides (default: the retriever's default)",
    )
    parser.add_argument(
        "--direct-ingress",
        action="store_true",
        help="RAY_SERVE_ENABLE_DIRECT_INGRESS=1: the retriever replica also listens on its own port; Serve at 1"
        " client is then measured both through the proxy and straight to the replica (the proxy's own hop)",
    )
    parser.add_argument("--in-process-threads", type=int, default=None, help="torch threads of the baseline")
    parser.add_argument("--load-test", type=int, default=1000, help="requests of the load test (0: skip)")
    parser.add_argument(
        "--repeats", type=int, default=3, help="paired repeats of the baselines and Serve at 1 client"
    )
    args = parser.parse_args()  # fmt: skip
    index_dir = str(Path(args.index_dir).resolve())
    queries = _queries(args.requests)
    if args.worker_niceness is not None:
        os.environ["RAY_worker_niceness"] = str(args.worker_niceness)  # noqa: SIM112  (Ray reads this exact name)
    if args.in_process_threads:
        import torch

        torch.set_num_threads(args.in_process_threads)

    searcher = Searcher(index_dir)
    for i, q in enumerate(queries[:16]):  # warm-up: encoder, indexes and document stores loaded
        searcher.documents(list(searcher.search({str(i): q}, top_k=TOP_K, mode=args.mode)[str(i)]))
    import torch

    node_threads = torch.get_num_threads()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    cluster = ClusterConfig(ray=RayInitConfig(num_cpus=4), serve=ClusterServeConfig(http_port=port))
    if args.retriever_threads is not None:
        cluster.retrieval.retriever_threads = args.retriever_threads
    if args.serve_same_loop is not None:
        cluster.serve.same_loop = bool(args.serve_same_loop)
    cluster.serve.direct_ingress = args.direct_ingress
    with ray_session(cluster):
        from ray import serve

        from actors.apps import build_serving_apps
        from actors.builder import (
            RETRIEVER_DEPLOYMENT,
            direct_ingress_urls,
            retrieval_app_name,
            serve_start_kwargs,
        )
        from pipelines.common import run_apps

        # Started as the product starts it (pipelines.serve): proxy logs at cluster.serve.log_level; the
        # Retriever is its own application's ingress at /v1/retrieve, beside the main application.
        serve.start(**serve_start_kwargs(cluster))
        run_apps(
            build_serving_apps(
                None, RetrieverConfig(top_k=TOP_K, mode=args.mode), None, index_dir, cluster, name="bench"
            )
        )
        url = f"http://127.0.0.1:{port}"
        handle = serve.get_deployment_handle(RETRIEVER_DEPLOYMENT, app_name=retrieval_app_name("bench"))
        replica = handle.runtime_info.remote().result()
        direct = direct_ingress_urls([retrieval_app_name("bench")]).get(retrieval_app_name("bench"))
        if args.direct_ingress and not direct:
            raise RuntimeError("direct ingress is on but Serve lists no replica port for the retriever")
        asyncio.run(_through_serve(url, queries[:16], 4))  # warm-up
        if direct:
            asyncio.run(_through_serve(direct, queries[:16], 4))
        # Baselines and Serve at 1 client in turn, `repeats` times: on a shared machine the speed of the
        # same search drifts by tens of percent between minutes, so each comparison is paired in time.
        # The second baseline runs with the replica's thread count: the difference to it is Serve's own
        # cost; the difference between the two baselines is the thread count the replica is given.
        thread_counts = sorted({node_threads, replica["torch_threads"]}, reverse=True)
        repeats = []
        for _ in range(args.repeats):
            base = {t: _in_process(searcher, queries, args.mode, t) for t in thread_counts}
            qps1, lat1, codes1 = asyncio.run(_through_serve(url, queries, 1))
            inside = handle.recent_latencies.remote(len(queries)).result()
            lat_direct = asyncio.run(_through_serve(direct, queries, 1))[1] if direct else []
            repeats.append((base, qps1, lat1, inside, sum(x >= 500 for x in codes1), lat_direct))
        rows = [(c, *asyncio.run(_through_serve(url, queries, c))) for c in (8, 32)]
        # The same requests by deployment handle from this process: no HTTP proxy.
        by_handle = [(c, *asyncio.run(_through_handle(handle, queries, c))) for c in (1, 32)]
        load_qps, _, load_codes = (
            asyncio.run(_through_serve(url, _queries(args.load_test), 32))
            if args.load_test
            else (0.0, [], [])
        )
        bad = [
            (body, want, httpx.post(f"{url}/v1/retrieve", json=body, timeout=60).status_code)
            for body, want in BAD
        ]

    ms = 1000.0
    med = statistics.median
    qps_in = med(r[0][node_threads][0] for r in repeats)
    print(
        f"\nindex {index_dir}, mode {args.mode}, top_k={TOP_K} per source, {len(queries)} requests per level"
    )
    print(f"in-process: torch threads {node_threads}, nice {os.nice(0)}; replica: {replica}, "
          f"serve_same_loop={cluster.serve.same_loop}\n")  # fmt: skip
    heads = [f"in-proc {t} thr" for t in thread_counts]
    print(f"{'repeat':>6} " + " ".join(f"{h:>14}" for h in heads)
          + f" {'Serve @1':>9} {'in replica':>10} {'hops':>6} " + " ".join(f"{'added vs ' + str(t):>11}" for t in thread_counts))  # fmt: skip
    added: dict[int, list[float]] = {t: [] for t in thread_counts}
    hops = []
    for i, (base, _, lat1, inside, _, _) in enumerate(repeats, 1):
        p_serve, p_inside = ms * med(lat1), ms * med(inside)
        hops.append(p_serve - p_inside)
        for t in thread_counts:
            added[t].append(p_serve - ms * med(base[t][1]))
        print(f"{i:>6} " + " ".join(f"{ms * med(base[t][1]):>11.1f} ms" for t in thread_counts)
              + f" {p_serve:>6.1f} ms {p_inside:>7.1f} ms {hops[-1]:>6.1f} "
              + " ".join(f"{added[t][-1]:>8.1f} ms" for t in thread_counts))  # fmt: skip
    print(f"\n{'clients':>7} {'q/s':>8} {'÷ in-proc':>10} {'p50 ms':>8} {'p99 ms':>8} {'5xx':>4}")
    one = [(1, med(r[1] for r in repeats), [x for r in repeats for x in r[2]], sum(r[4] for r in repeats))]
    for c, qps, lat, codes in [*one, *[(c, q, lt, sum(x >= 500 for x in cs)) for c, q, lt, cs in rows]]:
        print(f"{c:>7} {qps:>8.1f} {qps / qps_in:>10.2f} {ms * med(lat):>8.1f} "
              f"{ms * _pct(lat, 0.99):>8.1f} {codes:>4}")  # fmt: skip
    for c, qps, lat in by_handle:
        print(f"{'handle ' + str(c):>7} {qps:>8.1f} {qps / qps_in:>10.2f} {ms * med(lat):>8.1f} "
              f"{ms * _pct(lat, 0.99):>8.1f}    -   (deployment handle from the driver: no proxy)")  # fmt: skip
    print(
        f"\np50 latency added by Serve at 1 client, median of {len(repeats)} paired repeats (target ≤ 10 ms):"
    )
    for t in thread_counts:
        what = "the node's threads" if t == node_threads else "the replica's threads: Serve's own cost"
        print(f"  vs in-process at {t} thread(s) ({what}): {med(added[t]):.1f} ms "
              f"(repeats {', '.join(f'{a:.1f}' for a in added[t])})")  # fmt: skip
    print(f"  the hops (client → proxy → replica): {med(hops):.1f} ms")
    if direct:
        direct_p50 = [ms * med(r[5]) for r in repeats]
        via_proxy = [ms * med(r[2]) for r in repeats]
        for t in thread_counts:
            d_added = [d - ms * med(r[0][t][1]) for d, r in zip(direct_p50, repeats, strict=True)]
            print(f"  added with direct ingress, vs in-process at {t} thread(s): {med(d_added):.1f} ms "
                  f"(repeats {', '.join(f'{a:.1f}' for a in d_added)})")  # fmt: skip
        print(f"  direct ingress ({direct}, no proxy): p50 {med(direct_p50):.1f} ms at 1 client vs "
              f"{med(via_proxy):.1f} ms through the proxy; the proxy's hop: "
              f"{med(p - d for p, d in zip(via_proxy, direct_p50, strict=True)):.1f} ms "
              f"(repeats {', '.join(f'{p - d:.1f}' for p, d in zip(via_proxy, direct_p50, strict=True))})")  # fmt: skip
    print(f"ratio at 32 clients: {rows[1][1] / qps_in:.2f} (target ≥ 0.5)")
    print(f"load test: {args.load_test} requests at 32 concurrent, {load_qps:.1f} q/s, "
          f"{sum(x >= 500 for x in load_codes)} server errors, {load_codes.count(200)} ok")  # fmt: skip
    print("bad requests: " + ", ".join(f"{want}->{got}" for _, want, got in bad)
          + ("  (all 4xx)" if all(400 <= g < 500 for *_, g in bad) else "  (NOT all 4xx)"))  # fmt: skip


if __name__ == "__main__":
    main()
