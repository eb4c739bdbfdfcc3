"""Questions/s of the tool-using QA agent against a fixed-latency model: does it scale with concurrency?

Run: ``python benchmarks/bench_agent.py [--latency-ms 100] [--retrieval-ms 10] [--rounds 2]``

An OpenAI-compatible endpoint runs in a child process (aiohttp) and answers
every request after a fixed delay, with unlimited capacity. Its replies are scripted from the request
alone (no per-question state), so they drive the real agent through a realistic tool sequence:
perform_comparison -> enable_search (written as a ```json fence, as the CPU model does) ->
relevance_analysis -> locate_evidence -> final_answer -> the final constrained answer call, i.e. nine
model calls per question. Retrieval and reranking are in-memory fakes with a fixed delay. The agent is
the real ``medagent`` code talking HTTP through ``medagent.llm.openai_client``.

Printed: questions/s at 1, 8 and 64 questions in flight; the ratio of 64-concurrent throughput to 64x
the sequential throughput (1.0 = perfect overlap; target >= 0.8); and the share of each question's wall
time spent outside model and retrieval calls (target <= 5%). (The first version of the client used httpx,
whose pool doubled the mean call latency at 64 in flight, ratio 0.48 — encode/httpx#3215; the client now
uses aiohttp, and prompt templates are compiled once.)
The server shares the machine and the GIL with the agents, so read the ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from aiohttp import web  # noqa: E402

from medagent.agent import build_agent  # noqa: E402
from medagent.agent.services import AgentDeps, Doc  # noqa: E402
from medagent.config import AgentConfig  # noqa: E402
from medagent.llm.openai_client import OpenAIChatClient  # noqa: E402
from medagent.types import Prediction, Question  # noqa: E402

SENTENCE = "Clopidogrel irreversibly blocks the platelet P2Y12 ADP receptor"
FILLER = "Antiplatelet therapy after coronary stenting reduces thrombotic events in most patients. " * 5


def _completion(
    content: str = "", calls: list[dict[str, Any]] | None = None, prompt_chars: int = 0
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "model": "bench",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": max(1, len(content) // 4)},
    }


def _call(name: str, args: dict[str, Any], n: int) -> list[dict[str, Any]]:
    return [{"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]


def scripted_reply(body: dict[str, Any]) -> dict[str, Any]:
    """The model's reply, decided from the request: which call this is and how far the conversation got."""
    messages = body["messages"]
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    system, last = messages[0]["content"], str(messages[-1].get("content") or "")
    if body.get("tools"):
        turn = sum(m["role"] == "assistant" for m in messages)
        if turn == 0:
            return _completion(
                "", _call("perform_comparison", {"question": messages[1]["content"][:80]}, turn), chars
            )
        if turn == 1:
            fence = json.dumps(
                {"name": "enable_search", "arguments": {"query": "P2Y12 inhibitor after stenting"}}
            )
            return _completion(f"I need evidence.\n```json\n{fence}\n```", None, chars)
        if turn == 2:
            return _completion("", _call("relevance_analysis", {}, turn), chars)
        if turn == 3:
            return _completion("", _call("locate_evidence", {"doc_ids": ["D1", "D2"]}, turn), chars)
        return _completion("", _call("final_answer", {"answer": "B"}, turn), chars)
    ids = re.findall(r'<document id="(D\d+)"', last)
    if system.startswith("You judge whether documents"):
        judged = [{"id": h, "relevant": i < 2, "reason": "on P2Y12"} for i, h in enumerate(ids)]
        return _completion(json.dumps({"judgements": judged}), None, chars)
    if system.startswith("You locate evidence"):
        return _completion(json.dumps({"evidence": [{"id": h, "quote": SENTENCE} for h in ids]}), None, chars)
    if system.startswith("You are a medical expert. Compare"):
        rows = [{"option": k, "supporting": "-", "against": "-", "verdict": "possible"} for k in "ABCD"]
        return _completion(json.dumps({"comparison": rows}), None, chars)
    return _completion('{"answer": "B"}', None, chars)


def _serve_endpoint(latency_s: float, ports: Any) -> None:
    """The endpoint's process: aiohttp on a free loopback port, reported through ``ports``."""

    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(latency_s)
        return web.json_response(scripted_reply(body))

    async def main() -> None:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/chat/completions", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        ports.put(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


class FixedLatencyEndpoint:
    """``/v1/chat/completions`` that sleeps ``latency_s`` and replies from ``scripted_reply``.

    It runs in its own process, as a real endpoint would: in a thread of this one it would share the GIL
    with the agents it is measuring.
    """

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self._proc: Any = None

    def start(self) -> str:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        ports = ctx.Queue()
        self._proc = ctx.Process(target=_serve_endpoint, args=(self.latency_s, ports), daemon=True)
        self._proc.start()
        return f"http://127.0.0.1:{ports.get(timeout=60)}/v1"

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.join(10)


class SlowRetriever:
    def __init__(self, delay_s: float, n_docs: int = 64) -> None:
        self.delay_s = delay_s
        self.docs = [
            Doc(
                id=f"pmid{i}", source="pubmed", title=f"Study {i}", content=f"{FILLER}{SENTENCE} (study {i})."
            )
            for i in range(n_docs)
        ]

    async def retrieve(self, query: str, top_k: int, **_: Any) -> list[Doc]:
        await asyncio.sleep(self.delay_s)
        return self.docs[:top_k]


class SlowReranker:
    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    async def rerank(self, query: str, docs: list[Doc], top_r: int) -> list[Doc]:
        await asyncio.sleep(self.delay_s)
        return docs[:top_r]


def questions(n: int) -> list[Question]:
    return [
        Question(
            id=f"q{i}",
            text=f"Case {i}: a 60-year-old man had a coronary stent placed. Which drug is a P2Y12 inhibitor?",
            options={"A": "Aspirin", "B": "Clopidogrel", "C": "Warfarin", "D": "Heparin"},
            benchmark="bench",
        )
        for i in range(n)
    ]


async def measure(agent: Any, qs: list[Question], in_flight: int) -> tuple[float, list[Prediction]]:
    sem = asyncio.Semaphore(in_flight)

    async def one(q: Question) -> Prediction:
        async with sem:
            return await agent.answer(q)  # type: ignore[no-any-return]

    start = time.perf_counter()
    preds = list(await asyncio.gather(*(one(q) for q in qs)))
    return time.perf_counter() - start, preds


def outside_share(preds: list[Prediction]) -> float:
    """Share of question wall time not inside an LLM or retrieval call (summed over questions)."""
    wall = sum(p.latency_s for p in preds)
    inside = sum((p.usage["llm_ms"] + p.usage["retrieval_ms"]) / 1000 for p in preds)
    return max(0.0, wall - inside) / wall


async def run_agent(base_url: str, args: argparse.Namespace) -> dict[int, float]:
    client = OpenAIChatClient(base_url, "bench", max_retries=0, timeout_s=60)
    services = AgentDeps(
        retriever=SlowRetriever(args.retrieval_ms / 1000),
        reranker=SlowReranker(args.retrieval_ms / 1000),
        json_schema=True,
    )
    agent = build_agent(AgentConfig(mode="full"), client, services)
    await measure(agent, questions(8), 8)  # warm-up: connections, imports
    print(
        f"{'in flight':>9} {'questions':>9} {'wall s':>8} {'q/s':>8} {'calls/q':>7} {'ms/call':>7} {'outside':>8}"
    )
    qps: dict[int, float] = {}
    for in_flight in (1, 8, 64):
        n = args.sequential if in_flight == 1 else 2 * in_flight
        best: tuple[float, list[Prediction]] | None = None
        for _ in range(args.rounds):
            wall, preds = await measure(agent, questions(n), in_flight)
            # The scripted run must have gone through the whole tool sequence, or the numbers mean nothing.
            assert all(p.answer == "B" and len(p.evidence) == 2 for p in preds), preds[0]
            if best is None or wall < best[0]:
                best = (wall, preds)
        assert best is not None
        wall, preds = best
        qps[in_flight] = n / wall
        calls = sum(p.usage["llm_calls"] for p in preds)
        ms_per_call = sum(p.usage["llm_ms"] for p in preds) / calls
        print(
            f"{in_flight:>9} {n:>9} {wall:>8.2f} {qps[in_flight]:>8.2f} {calls / n:>7.1f} "
            f"{ms_per_call:>7.1f} {100 * outside_share(preds):>7.2f}%"
        )
    print(f"q/s at 64 / (64 x q/s at 1) = {qps[64] / (64 * qps[1]):.3f}  (target >= 0.8)")
    print(f"q/s at 8 / (8 x q/s at 1)   = {qps[8] / (8 * qps[1]):.3f}")
    await client.aclose()
    return qps


async def run(args: argparse.Namespace) -> None:
    endpoint = FixedLatencyEndpoint(args.latency_ms / 1000)
    base_url = endpoint.start()
    print(
        f"endpoint latency {args.latency_ms:.0f} ms/call; retrieve and rerank {args.retrieval_ms:.0f} ms each"
    )
    await run_agent(base_url, args)
    endpoint.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency-ms", type=float, default=100.0, help="fixed delay of every model call")
    parser.add_argument("--retrieval-ms", type=float, default=10.0, help="delay of retrieve and of rerank")
    parser.add_argument("--sequential", type=int, default=8, help="questions in the sequential run")
    parser.add_argument("--rounds", type=int, default=2, help="repeats per setting; the fastest is kept")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
