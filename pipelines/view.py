"""Look at runs in a browser: ``python -m pipelines.view outputs/medqa-*/ outputs/interviews-*/ [--port 8765]``.

Serves a read-only page over the run directories named (paths or globs; a folder is searched for runs):
the runs with their metrics and CI, every question across the runs with flips between two of them, one
question's trace and evidence, and interviews turn by turn. Binds 127.0.0.1 unless ``--host`` says otherwise.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from collections.abc import Sequence
from typing import Any

from medagent.types import Question

log = logging.getLogger("medagent.view")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m pipelines.view",
        description="A read-only results browser over run directories (benchmark and interview runs).",
    )
    p.add_argument(
        "runs", nargs="+", metavar="RUN_DIR_OR_GLOB", help="run directories, globs, or folders of runs"
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    p.add_argument("--port", type=int, default=8765, help="port (0: any free port; default 8765)")
    p.add_argument(
        "--data-root",
        default=None,
        help="read question texts from the benchmark data for runs written before they kept questions.jsonl",
    )
    return p.parse_args(argv)


def benchmark_questions(runs_config: list[dict[str, Any]], data_root: str) -> dict[str, dict[str, Question]]:
    """Question texts of the benchmarks the runs' manifests name, loaded as the runs loaded them."""
    from medagent.data import load_benchmark

    out: dict[str, dict[str, Question]] = {}
    for config in runs_config:
        bench = config.get("benchmark") or {}
        name = bench.get("name")
        if not name or name in out:
            continue
        try:
            data = load_benchmark(bench.get("loader") or name, data_root, **(bench.get("options") or {}))
        except (KeyError, FileNotFoundError, ValueError) as e:
            log.warning("question texts of %s not loaded: %s", name, e)
            continue
        out[name] = {q.id: q for q, _ in data.pairs}
    return out


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    import uvicorn

    from medagent.view import build_app, load_view

    runs, notes = load_view(args.runs)
    if args.data_root:
        missing = [vr.run.config for vr in runs if vr.run is not None and not vr.questions]
        if missing:
            runs, notes = load_view(args.runs, benchmark_questions(missing, args.data_root))
    if not runs:
        sys.exit("no run directory found: " + "; ".join(notes))
    for note in notes:
        log.warning("%s", note)
    if args.port == 0:  # pick the free port now, so the printed URL is the real one
        with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as sock:
            sock.bind((args.host, 0))
            args.port = sock.getsockname()[1]
    hosts = [args.host, *LOOPBACK] if args.host in LOOPBACK else ["*"]
    app = build_app(runs, notes, hosts=hosts)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    server = uvicorn.Server(config)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"{len(runs)} runs; open http://{shown}:{args.port}/  (Ctrl-C stops)", flush=True)
    server.run()


if __name__ == "__main__":
    main()
