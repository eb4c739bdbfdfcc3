"""Run directories for the report: found by path or glob, opened read-only, identified by their config.

A run is identified by its manifest's config (``RunKey``: benchmark name, agent mode, ``agent.retrieval.top_r``,
``agent.open_ended``, LLM name). Problems (no manifest, no predictions, two runs with one identity) become
notes for the report, never exceptions: a report over a half-finished sweep is still useful.
"""

from __future__ import annotations

import glob
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from medagent.config.legacy import upgrade_config
from medagent.run import RunDir
from medagent.types import Gold, Prediction

KEY_FIELDS = ("benchmark", "llm", "mode", "top_r", "open_ended")
# Appended to the mode of a run whose searches left each question's own articles out
# (agent.retrieval.hold_out_own_evidence): the same agent with and without its evidence are two arms.
HELD_OUT = "/held_out"


@dataclass(frozen=True)
class RunKey:
    """What a run measured; two runs with the same key are the same experiment."""

    benchmark: str
    mode: str
    top_r: int | None
    open_ended: bool
    llm: str

    def cell(self) -> tuple[str, str, str, bool]:
        """The table cell a run fills (TopR aside: sweeps have one run per TopR in one cell)."""
        return (self.benchmark, self.llm, self.mode, self.open_ended)


@dataclass
class Run:
    """One run directory, loaded."""

    path: Path
    key: RunKey
    config: dict[str, Any]
    predictions: list[Prediction]
    golds: dict[str, Gold]
    metrics: dict[str, Any] | None
    # Predictions whose trace file exists (their ``trace`` is loaded).
    n_traced: int = 0
    notes: list[str] = field(default_factory=list)
    # Where the run departs from the paper's method (its manifest's ``departures``; None: not recorded).
    departures: list[str] | None = None

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"


def _is_benchmark_config(config: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(config, dict) and "benchmark" in config and "agent" in config


def _is_run_dir(path: Path) -> bool:
    """A benchmark run: predictions, or a manifest of ``run_benchmark`` (index, report and network runs
    have manifests too)."""
    if not path.is_dir():
        return False
    rd = RunDir(path, read_only=True)
    if rd.predictions.exists():
        return True
    try:
        return _is_benchmark_config((rd.read_json(rd.manifest) or {}).get("config"))
    except ValueError:  # not JSON: not ours
        return False


def find_run_dirs(patterns: Iterable[str]) -> tuple[list[Path], list[str]]:
    """Run directories named by ``patterns`` (paths or globs); a folder that is not a run is searched below.

    Returns:
        The sorted, de-duplicated run directories, and notes for patterns that matched nothing.
    """
    found: set[Path] = set()
    notes: list[str] = []
    for pattern in patterns:
        matches = [Path(m) for m in sorted(glob.glob(str(Path(pattern).expanduser()), recursive=True))]
        hits = 0
        for m in matches:
            if _is_run_dir(m):
                found.add(m.resolve())
                hits += 1
            elif m.is_dir():
                marker = RunDir(m, read_only=True).predictions.name
                for p in m.rglob(marker):
                    # Hidden folders (.hydra) hold no runs.
                    if not any(part.startswith(".") for part in p.relative_to(m).parts):
                        found.add(p.parent.resolve())
                        hits += 1
        if not hits:
            notes.append(f"`{pattern}` matched no run directory")
    return sorted(found), notes


def run_key(config: dict[str, Any] | None, metrics: dict[str, Any] | None) -> RunKey | None:
    """The identity of a run from its manifest config, else from ``metrics.json`` (older runs)."""
    if _is_benchmark_config(config):
        agent = upgrade_config(config).get("agent") or {}  # older run dirs record the agent's keys flat
        top_r = (agent.get("retrieval") or {}).get("top_r")
        held = bool((agent.get("retrieval") or {}).get("hold_out_own_evidence"))
        return RunKey(
            benchmark=str((config.get("benchmark") or {}).get("name", "?")),
            mode=str(agent.get("mode", "?")) + (HELD_OUT if held else ""),
            top_r=int(top_r) if top_r is not None else None,
            open_ended=bool(agent.get("open_ended", False)),
            llm=str((config.get("llm") or {}).get("name", "?")),
        )
    if metrics and "benchmark" in metrics and "agent" in metrics:
        return RunKey(
            benchmark=str(metrics["benchmark"]),
            mode=str(metrics["agent"]),
            top_r=None,
            open_ended="open_ended" in metrics,
            llm=str(metrics.get("llm", "?")),
        )
    return None


def load_run(path: Path, *, traces: bool = True) -> tuple[Run | None, list[str]]:
    """Opens one run read-only; None (with a note) when it cannot be identified or has no predictions.
    ``traces=False`` leaves every ``trace`` empty (a viewer reads one question's trace when it is shown)."""
    rd = RunDir(path, read_only=True)
    manifest = rd.read_json(rd.manifest)
    metrics = rd.read_json(rd.metrics)
    config = (manifest or {}).get("config") or {}
    key = run_key(config, metrics)
    if key is None:
        return None, [f"{path}: no manifest.json config (or metrics.json) to identify the run; skipped"]
    predictions = rd.load_predictions(with_traces=traces)
    if not predictions:
        return None, [f"{path}: no predictions yet; skipped"]
    notes = [] if manifest else [f"{path}: no manifest.json; identified from metrics.json (TopR unknown)"]
    n_traced = sum(rd.trace_path(p.id).exists() for p in predictions)
    golds = rd.load_golds()
    if not golds:
        notes.append(f"{path}: no golds.jsonl; the run cannot be scored")
    run = Run(path, key, config, predictions, golds, metrics, n_traced)
    found = (manifest or {}).get("departures")
    run.departures = [str(d) for d in found] if isinstance(found, list) else None
    return run, notes


def load_runs(patterns: Sequence[str]) -> tuple[list[Run], list[str]]:
    """Loads every run named by ``patterns``; of two runs with the same ``RunKey`` the larger one is kept
    (then the one whose predictions were written last), and the other is named in a note."""
    paths, notes = find_run_dirs(patterns)
    by_key: dict[RunKey, list[Run]] = {}
    for path in paths:
        run, run_notes = load_run(path)
        notes += run_notes
        if run is not None:
            by_key.setdefault(run.key, []).append(run)
    runs: list[Run] = []
    for key, group in by_key.items():
        group.sort(
            key=lambda r: (len(r.predictions), RunDir(r.path, read_only=True).predictions.stat().st_mtime)
        )
        runs.append(group[-1])
        for other in group[:-1]:
            notes.append(f"{other.path}: same experiment as {group[-1].path} ({describe(key)}); left out")
    runs.sort(key=lambda r: (r.key.benchmark, r.key.llm, r.key.mode, r.key.open_ended, r.key.top_r or 0))
    return runs, notes


def describe(key: RunKey) -> str:
    return (
        f"{key.benchmark}, {key.llm}, {key.mode}, top_r={key.top_r}, "
        f"{'open-ended' if key.open_ended else 'multiple choice'}"
    )


def select_cells(runs: Sequence[Run], main_top_r: int) -> tuple[list[Run], list[str]]:
    """One run per table cell (benchmark, llm, mode, format): the run at ``main_top_r`` when a TopR sweep
    put several in one cell, else the one with the most predictions (then the largest TopR), with a note."""
    cells: dict[tuple[str, str, str, bool], list[Run]] = {}
    for r in runs:
        cells.setdefault(r.key.cell(), []).append(r)
    chosen: list[Run] = []
    notes: list[str] = []
    for group in cells.values():
        if len(group) == 1:
            chosen.append(group[0])
            continue
        at_main = [r for r in group if r.key.top_r == main_top_r]
        if at_main:
            chosen.append(at_main[0])
            continue
        best = max(group, key=lambda r: (len(r.predictions), r.key.top_r or 0))
        chosen.append(best)
        notes.append(
            f"{best.key.benchmark} / {best.key.llm} / {best.key.mode}: no run at top_r={main_top_r}; "
            f"tables use top_r={best.key.top_r} (of {sorted(r.key.top_r or 0 for r in group)})"
        )
    chosen.sort(key=lambda r: (r.key.benchmark, r.key.llm, r.key.mode, r.key.open_ended))
    return chosen, notes


def labels(runs: Sequence[Run]) -> dict[Path, str]:
    """Short labels: the benchmark, plus whichever other key fields vary among ``runs``."""
    varying = [f for f in KEY_FIELDS[1:] if len({getattr(r.key, f) for r in runs}) > 1]
    out = {}
    for r in runs:
        parts = [r.key.benchmark]
        for f in varying:
            v = getattr(r.key, f)
            parts.append(
                ("open" if v else "mc") if f == "open_ended" else (f"top_r={v}" if f == "top_r" else str(v))
            )
        out[r.path] = " / ".join(parts)
    return out
