"""Architecture rules: the library imports without Ray; only pipelines/ start the world; packages layer."""

import ast
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


def _medagent_imports(path: Path) -> set[str]:
    """Every ``medagent`` module a file imports, at any depth of the file (lazy imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if node.module == "medagent":  # ``from medagent import network``
                found.update(f"medagent.{a.name}" for a in node.names)
    return {m for m in found if m == "medagent" or m.startswith("medagent.")}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_history_imports_neither_network_analysis_nor_qa_agent() -> None:
    offenders = sorted(
        (str(p.relative_to(REPO)), m)
        for p in (REPO / "medagent" / "history").rglob("*.py")
        for m in _medagent_imports(p)
        if _within(m, "medagent.network") or _within(m, "medagent.agent")
    )
    assert offenders == []


def _module_imports(path: Path, modules: set[str]) -> set[str]:
    """The ``medagent`` modules a file imports (``from a.b import c`` names module ``a.b.c`` when it is one),
    type-only imports included: a cycle through ``TYPE_CHECKING`` still ties the two modules together."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                for a in node.names
            )
    return found & modules


def test_no_import_cycle_between_medagent_modules() -> None:
    files = {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
        for p in (REPO / "medagent").rglob("*.py")
    }
    edges = {m: _module_imports(p, set(files)) - {m} for m, p in files.items()}

    def reaches(a: str, b: str) -> bool:
        seen, todo = {a}, [a]
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt == b:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    cycles = sorted((a, b) for a in edges for b in edges[a] if a < b and reaches(b, a))
    assert cycles == []


def test_no_import_cycle_between_medagent_packages() -> None:
    edges: dict[str, set[str]] = {}
    for p in (REPO / "medagent").rglob("*.py"):
        parts = p.relative_to(REPO / "medagent").with_suffix("").parts
        src = parts[0]  # a package, or a top-level module (types, api, services, ...)
        for m in _medagent_imports(p):
            dst = m.split(".")[1] if "." in m else src
            if dst != src:
                edges.setdefault(src, set()).add(dst)

    def reaches(a: str, b: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt == b:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    cycles = sorted((a, b) for a, targets in edges.items() for b in targets if reaches(b, a))
    assert cycles == []


# Modules under pipelines/ that the entry points may import: shared run code, not entry points (no
# hydra.main, no __main__). benchmark_run is the one benchmark run that run_benchmark starts from the command
# line and run_suite drives cell by cell in its own Ray session.
SHARED_PIPELINE_MODULES = {"common", "benchmark_run", "interview_arms"}


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
