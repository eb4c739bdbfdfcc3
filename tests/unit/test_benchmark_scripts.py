"""Every script under benchmarks/ imports: a helper one of them borrows from another cannot move or be
renamed without this failing (each script's work runs only under ``__main__``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_benchmark_script_imports() -> None:
    names = sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if p.stem != "__init__")
    assert len(names) >= 10
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module(f'benchmarks.{n}')\n"
    # A fresh interpreter: importing the scripts must not depend on what other tests imported first.
    done = subprocess.run(
        [sys.executable, "-c", code, *names], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_replayed_agent_opening_renders_the_agents_real_prompt() -> None:
    # bench_llamacpp_settings and bench_prefix_router replay it: a variable the prompt gained since must
    # reach it, or both fail only when run.
    from benchmarks.bench_llamacpp_settings import opening
    from medagent.types import Question

    messages = opening(Question("q1", "Which drug?", {"A": "aspirin", "B": "heparin"}, "medqa"))
    assert messages[0]["role"] == "system" and "Which drug?" in messages[-1]["content"]
    assert "Only quoted evidence is kept in memory" in messages[0]["content"]  # full's bank: cache_prune
