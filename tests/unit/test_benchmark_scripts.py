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
