"""Architecture rules: the library imports without Ray; only pipelines/ start the world."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_library_imports_without_ray_or_gpu_stack() -> None:
    modules = sorted(
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for p in (REPO / "medagent").rglob("*.py")
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = [m for m in ('ray', 'vllm', 'xllamacpp', 'faiss') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_world_starters_only_in_pipelines() -> None:
    pattern = re.compile(r"\b(ray\.init|serve\.run|hydra\.main)\s*\(")
    offenders = [
        str(p.relative_to(REPO))
        for d in ("medagent", "actors")
        for p in (REPO / d).rglob("*.py")
        if pattern.search(p.read_text())
    ]
    assert offenders == []


def test_modules_stay_small() -> None:
    big = [
        (str(p.relative_to(REPO)), n)
        for d in ("medagent", "actors", "pipelines")
        for p in (REPO / d).rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 450
    ]
    assert big == []


# Modules under pipelines/ that the entry points may import: shared run code, not entry points (no
# hydra.main, no __main__). benchmark_run is the one benchmark run that run_benchmark starts from the command
# line and run_suite drives cell by cell in its own Ray session.
SHARED_PIPELINE_MODULES = {"common", "benchmark_run"}


def test_no_pipeline_imports_another() -> None:
    pattern = re.compile(
        r"^\s*(?:from\s+pipelines(?:\.(\w+))?\s+import\s+(\w+)|import\s+pipelines\.(\w+))", re.M
    )
    offenders = []
    for p in sorted((REPO / "pipelines").glob("*.py")):
        for m in pattern.finditer(p.read_text()):
            target = m.group(1) or m.group(3) or m.group(2)
            if target not in SHARED_PIPELINE_MODULES:
                offenders.append(f"{p.stem} -> {target}")
    assert offenders == []


def test_shared_pipeline_modules_are_not_entry_points() -> None:
    entry = re.compile(r"\bhydra\.main\s*\(|__main__")
    assert [
        m
        for m in sorted(SHARED_PIPELINE_MODULES)
        if entry.search((REPO / "pipelines" / f"{m}.py").read_text())
    ] == []
