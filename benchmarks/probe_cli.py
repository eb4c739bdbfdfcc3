"""The edge probe's bad-input CLI runs (finding 10): exit status, stderr lines, whether a run dir was left.

Each case is a ``pipelines.run_benchmark`` invocation that must fail before Ray starts. ``code_root`` is the
checkout under test (``python -m`` imports from the working directory first), so the probe can measure the
code before the hardening as well as this checkout's. ``benchmarks/probe_edge.py`` prints these rows beside
the HTTP edge's; run this file alone for the CLI rows only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def cli_rows(code_root: Path) -> list[dict[str, Any]]:
    """Finding 10: the benchmark CLI fed bad input (each run before Ray would start)."""
    tmp = Path(tempfile.mkdtemp(prefix="probe-edge-"))
    (tmp / "empty.jsonl").write_text("")
    (tmp / "bad.jsonl").write_text('{"id": "1"}\nnot json\n')
    (tmp / "a_file").write_text("")
    (tmp / "ok.jsonl").write_text(
        '{"id": "1", "question": "Q?", "options": {"A": "a", "B": "b"}, "answer": "A"}\n'
    )
    cases = [
        (
            "empty input",
            ["benchmark=jsonl", f"benchmark.options.path={tmp / 'empty.jsonl'}", f"run_dir={tmp / 'run1'}"],
            tmp / "run1",
        ),
        (
            "all-malformed input",
            ["benchmark=jsonl", f"benchmark.options.path={tmp / 'bad.jsonl'}", f"run_dir={tmp / 'run2'}"],
            tmp / "run2",
        ),
        (
            "missing file",
            ["benchmark=jsonl", f"benchmark.options.path={tmp / 'nope.jsonl'}", f"run_dir={tmp / 'run3'}"],
            tmp / "run3",
        ),
        (
            "run_dir is a file",
            ["benchmark=jsonl", f"benchmark.options.path={tmp / 'ok.jsonl'}", f"run_dir={tmp / 'a_file'}"],
            None,
        ),
        (
            "closed-set typo",
            ["agent=standalone", "agent.loop.memory=cahce", f"run_dir={tmp / 'run5'}"],
            tmp / "run5",
        ),
    ]
    rows = []
    for label, overrides, run_dir in cases:
        t = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "pipelines.run_benchmark", *overrides],
            capture_output=True,
            cwd=code_root,  # python -m puts the cwd first
            text=True,
            timeout=300,
            env=os.environ.copy(),
        )
        secs = time.perf_counter() - t
        out = (p.stdout + p.stderr).strip().splitlines()
        said = next(
            (x for x in out if "error" in x.lower() or "accuracy" in x or "Invalid" in x),
            out[-1] if out else "",
        )
        rows.append(
            {
                "finding": "10",
                "request": f"CLI: {label}",
                "status": f"exit {p.returncode}",
                "seconds": secs,
                "reply_bytes": 0,
                "log_bytes": len(p.stderr.encode()),
                "note": f"{len(p.stderr.splitlines())} stderr lines; run dir left: {bool(run_dir and run_dir.exists())}; {said[:110]!r}",
            }
        )
    return rows


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--code-root",
        type=Path,
        default=Path(__file__).resolve().parents[1],
        help="the checkout whose pipelines.run_benchmark is probed (default: this one)",
    )
    args = ap.parse_args()
    for r in cli_rows(args.code_root):
        print(f"{r['request'][:44]:44} {r['status']:>8} {r['seconds']:7.2f}s  {r['note']}")


if __name__ == "__main__":
    main()
