"""The edge review's probe, re-runnable on loopback with fakes behind the real HTTP edge.

Run (this checkout): ``python benchmarks/probe_edge.py``; the code before the hardening:
``PYTHONPATH=/path/to/old/checkout python benchmarks/probe_edge.py`` (the script itself may come from any
checkout: it imports the code under test from ``PYTHONPATH`` first).

Serves ``actors.ingress``'s FastAPI app and ``actors.retrieval_servers.RetrieverHTTPServer``'s handler with
uvicorn on 127.0.0.1, their handles replaced by fakes (``tests.unit._edge_fakes``: an LLM that records what
reaches it, a reranker, a real session store driving a scripted clinician; a retriever that answers empty),
so the numbers are the edge's own: status code, seconds and bytes of log each abusive request costs, and
whether it reached the engine. Model costs are not here: ``benchmarks/bench_rerank_limits.py`` times the
real CPU reranker at the old and new limits. Then the bad-input CLI runs (exit status, lines of stderr,
whether a run directory was left), and a bounded load test (p50/p99, count of 5xx).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import os
import socket
import statistics
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))  # after PYTHONPATH: the code under test comes from there
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import httpx  # noqa: E402
import uvicorn  # noqa: E402

import actors.ingress as ingress_mod  # noqa: E402
from actors.retrieval_servers import RetrieverHTTPServer  # noqa: E402
from benchmarks.probe_cli import cli_rows  # noqa: E402
from medagent.api import RetrieveResponse  # noqa: E402
from medagent.config import InterviewSessionsConfig, LLMConfig  # noqa: E402
from medagent.history import HistoryTakingAgent  # noqa: E402
from tests.configs import history_agent_config  # noqa: E402
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever  # noqa: E402

# The fakes are written here, not imported from tests.unit._edge_fakes, so the probe runs on older code too.
INFO = {
    "llm_served_name": "smollm2-135m",
    "llm_n_ctx": 2048,
    "index_dir": "/data/index/secret",
    "reranker": "x",
}


class Method:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


class FakeLLM:
    """Records the bodies that reach it; answers as llama.cpp does, naming its model by file."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.chat = Method(self._chat)

    async def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        msg = {"role": "assistant", "content": "ok"}
        return {"choices": [{"message": msg}], "model": "/root/.cache/models/SmolLM2-135M-Instruct-Q4_1.gguf"}


class FakeReranker:
    def __init__(self) -> None:
        self.rerank = Method(self._rerank)

    async def _rerank(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"results": {c["id"]: 1.0 / (i + 1) for i, c in enumerate(body["candidates"])}}


def session_store() -> Any:
    from dataclasses import asdict, fields

    from actors.interview_sessions import InterviewSessions

    limits = {"ttl_s": 600, "max_sessions": 64}
    if "starts_per_client" in {f.name for f in fields(InterviewSessionsConfig)}:
        limits["starts_per_client"] = 4
    cfg = InterviewSessionsConfig(enabled=True, agent=history_agent_config(max_turns=3), **limits)
    agent = HistoryTakingAgent(FakeClinician().model, cfg.agent, FakeRetriever(), BagOfWordsEmbedder())
    return InterviewSessions(asdict(cfg), asdict(LLMConfig()), agent=agent)


MSG = [{"role": "user", "content": "hi"}]


class Sessions:
    """A handle to the store with both shapes of the session API (the hardened ``call``, and the methods)."""

    def __init__(self) -> None:
        self.store = session_store()
        for name in ("call", "start", "answer", "get", "delete"):
            if hasattr(self.store, name):
                setattr(self, name, Method(getattr(self.store, name)))


def build_app() -> tuple[Any, FakeLLM]:
    llm = FakeLLM()
    ingress = object.__new__(ingress_mod.Ingress)
    ingress.llm_endpoint, ingress.llm, ingress.reranker, ingress.info = None, llm, FakeReranker(), dict(INFO)
    ingress.sessions = Sessions()
    import ray.serve

    ray.serve.get_replica_context = lambda: types.SimpleNamespace(servable_object=ingress)
    retriever = object.__new__(RetrieverHTTPServer)

    async def search(req: Any) -> RetrieveResponse:
        return RetrieveResponse(query_id=req.query_id, results={}, documents=[])

    retriever._search = search  # type: ignore[method-assign]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/retrieve"):
            from starlette.requests import Request

            scope = {**scope, "root_path": "/v1/retrieve"}
            response = await retriever(Request(scope, receive))
            await response(scope, receive, send)
        else:
            await ingress_mod.app(scope, receive, send)

    return app, llm


class LogBytes(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.buf = io.StringIO()
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.buf.write(self.format(record) + "\n")

    def take(self) -> int:
        n = len(self.buf.getvalue().encode("utf-8", "replace"))
        self.buf = io.StringIO()
        return n


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(app: Any, port: int) -> uvicorn.Server:
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="info", access_log=False)
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server


def requests() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(finding, label, path, httpx kwargs)."""
    deep = "[" * 900 + "]" * 900
    j = {"content-type": "application/json"}
    return [
        (
            "1",
            "n_probs=10**6",
            "/v1/chat/completions",
            {"json": {"messages": MSG, "max_tokens": 4, "n_probs": 10**6}},
        ),
        (
            "1",
            "n_predict=400, max_tokens=8",
            "/v1/chat/completions",
            {"json": {"messages": MSG, "max_tokens": 8, "n_predict": 400}},
        ),
        (
            "2",
            "rerank 1,024 x 1,500 chars",
            "/v1/rerank",
            {"json": {"query": "q", "candidates": [{"id": str(i), "text": "x" * 1500} for i in range(1024)]}},
        ),
        (
            "2",
            "rerank 1,024 x 20,000 chars (20 MB)",
            "/v1/rerank",
            {
                "json": {
                    "query": "q",
                    "candidates": [{"id": str(i), "text": "x" * 20_000} for i in range(1024)],
                }
            },
        ),
        ("3", "tools malformed", "/v1/chat/completions", {"json": {"messages": MSG, "tools": "abc"}}),
        (
            "3",
            "tool_calls malformed",
            "/v1/chat/completions",
            {"json": {"messages": [{"role": "assistant", "tool_calls": [{"id": 1}]}]}},
        ),
        (
            "3",
            "tool function without a name",
            "/v1/chat/completions",
            {"json": {"messages": MSG, "tools": [{"type": "function", "function": {}}]}},
        ),
        (
            "3",
            "image_url content",
            "/v1/chat/completions",
            {
                "json": {
                    "messages": [
                        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                    ]
                }
            },
        ),
        (
            "3",
            "lone \\ud800",
            "/v1/chat/completions",
            {"content": '{"messages": [{"role": "user", "content": "\\ud800"}]}', "headers": j},
        ),
        (
            "3",
            "temperature NaN",
            "/v1/chat/completions",
            {
                "content": '{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
                "headers": j,
            },
        ),
        ("3", "retrieve invalid UTF-8", "/v1/retrieve", {"content": b'{"query": "caf\xff"}', "headers": j}),
        (
            "4",
            "tools nested 900 deep",
            "/v1/chat/completions",
            {
                "content": '{"messages": [{"role": "user", "content": "hi"}], "tools": ' + deep + "}",
                "headers": j,
            },
        ),
        (
            "5",
            "session start, text/plain, other Origin",
            "/v1/interview/sessions",
            {"content": b"", "headers": {"content-type": "text/plain", "origin": "https://evil.example"}},
        ),
        (
            "6",
            "retrieve text/plain",
            "/v1/retrieve",
            {"content": b'{"query": "q"}', "headers": {"content-type": "text/plain"}},
        ),
        ("6", "retrieve 20 MB query (422 echo?)", "/v1/retrieve", {"json": {"query": "x" * 20_000_000}}),
        (
            "6",
            "retrieve query_id 1 MB",
            "/v1/retrieve",
            {"json": {"query": "q", "query_id": "x" * 1_000_000}},
        ),
        (
            "7",
            "chat 20 MB body",
            "/v1/chat/completions",
            {"json": {"messages": [{"role": "user", "content": "x" * 20_000_000}]}},
        ),
        (
            "7",
            "chat 10,000 messages",
            "/v1/chat/completions",
            {"json": {"messages": MSG * 10_000, "max_tokens": 4}},
        ),
        (
            "8",
            "chat reply names the model file",
            "/v1/chat/completions",
            {"json": {"messages": MSG, "max_tokens": 4}},
        ),
    ]


def probe(base: str, llm: FakeLLM, logs: LogBytes) -> list[dict[str, Any]]:
    rows = []
    with httpx.Client(base_url=base, timeout=120) as client:
        for finding, label, path, kwargs in requests():
            n_before = len(llm.bodies)
            logs.take()
            t = time.perf_counter()
            r = client.post(path, **kwargs)
            secs = time.perf_counter() - t
            time.sleep(0.05)  # let the server's log lines land
            reached = len(llm.bodies) > n_before
            note = f"reached engine: {reached}" if path.endswith("completions") else ""
            if label.startswith("chat reply"):
                note = f"model={r.json().get('model')!r}"
            rows.append(
                {
                    "finding": finding,
                    "request": label,
                    "status": r.status_code,
                    "seconds": secs,
                    "reply_bytes": len(r.content),
                    "log_bytes": logs.take(),
                    "note": note,
                }
            )
        # 4: session refusals (404/409/429): log bytes per refusal.
        logs.take()
        codes = []
        for _ in range(10):
            codes.append(client.get("/v1/interview/sessions/nope").status_code)
        for _ in range(6):
            codes.append(client.post("/v1/interview/sessions", json={}).status_code)
        time.sleep(0.05)
        rows.append(
            {
                "finding": "4",
                "request": "16 session requests (404 x10, then starts)",
                "status": sorted(set(codes)),
                "seconds": 0.0,
                "reply_bytes": 0,
                "log_bytes": logs.take(),
                "note": f"codes {codes}",
            }
        )
        # 8: headers and leaks.
        page, health, docs = client.get("/interview"), client.get("/healthz"), client.get("/docs")
        rows.append(
            {
                "finding": "8",
                "request": "GET /interview headers",
                "status": page.status_code,
                "seconds": 0.0,
                "reply_bytes": len(page.content),
                "log_bytes": 0,
                "note": f"CSP={'content-security-policy' in page.headers} XFO={'x-frame-options' in page.headers} nosniff={'x-content-type-options' in page.headers}",
            }
        )
        rows.append(
            {
                "finding": "8",
                "request": "GET /healthz, /docs",
                "status": [health.status_code, docs.status_code],
                "seconds": 0.0,
                "reply_bytes": len(health.content),
                "log_bytes": 0,
                "note": f"index path in /healthz: {'/data/index' in health.text}; /docs CDN: {'cdn' in docs.text}",
            }
        )
    return rows


async def load(
    base: str, n: int, concurrency: int, path: str, body: dict[str, Any]
) -> tuple[list[float], int]:
    sem, lat, errors = asyncio.Semaphore(concurrency), [], 0
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:

        async def one() -> None:
            nonlocal errors
            async with sem:
                t = time.perf_counter()
                try:
                    r = await client.post(path, json=body)
                    errors += r.status_code >= 500
                except httpx.TransportError:  # a dropped connection counts as a server error
                    errors += 1
                lat.append(time.perf_counter() - t)

        await asyncio.gather(*(one() for _ in range(n)))
    return lat, errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI runs")
    args = ap.parse_args()
    logs = LogBytes()
    app, llm = build_app()
    port = free_port()
    server = serve(app, port)
    # After uvicorn configured its loggers, which do not propagate: its tracebacks count too.
    for name in ("", "uvicorn", "uvicorn.error"):
        logging.getLogger(name).addHandler(logs)
    logging.getLogger().setLevel(logging.INFO)
    base = f"http://127.0.0.1:{port}"
    rows = probe(base, llm, logs)
    if not args.no_cli:
        rows += cli_rows(Path(ingress_mod.__file__).resolve().parents[1])
    print(f"code under test: {ingress_mod.__file__}")
    print(f"{'#':>2}  {'request':44} {'status':>12} {'seconds':>8} {'reply B':>9} {'log B':>9}  note")
    for r in rows:
        print(
            f"{r['finding']:>2}  {r['request'][:44]:44} {str(r['status']):>12} {r['seconds']:8.3f} "
            f"{r['reply_bytes']:9,} {r['log_bytes']:9,}  {r['note']}"
        )
    for label, n, conc, path, body in [
        ("retrieve", 1000, 32, "/v1/retrieve", {"query": "cystic fibrosis", "top_k": 4}),
        ("chat", 200, 8, "/v1/chat/completions", {"messages": MSG, "max_tokens": 8}),
    ]:
        lat, errors = asyncio.run(load(base, n, conc, path, body))
        q = statistics.quantiles(lat, n=100)
        print(
            f"load {label}: {n} requests at {conc} concurrent: p50 {q[49] * 1000:.1f} ms, "
            f"p99 {q[98] * 1000:.1f} ms, 5xx {errors} (fakes behind the edge: the edge's own cost)"
        )
    server.should_exit = True
    print(json.dumps({"rows": len(rows)}))


if __name__ == "__main__":
    main()
