"""Every benchmark of a paper table as one job: ``python -m pipelines.run_suite experiment=table1_mc limit=50``.

The experiment's sweep (``hydra.sweeper.params`` plus any comma list on the command line) is expanded into
cells exactly as ``run_benchmark -m`` would expand it, and each cell's ``RunConfig`` is composed from
``conf/config.yaml`` with the same overrides, so every cell writes to the run dir the multirun would use.
Ray starts once, the serving application is deployed once for all cells that share an LLM (the superset:
LLM + retriever + reranker when any of them searches), the cells run one after another through
``pipelines.benchmark_run.run``, and the report of ``pipelines.report`` is written into ``<suite dir>/report``.

Resuming: a cell whose run dir is complete is skipped, a partly done one answers only what is missing
(predictions are de-duplicated by question id), so rerunning the same command after a killed driver, a
lost node or a stopped suite costs no finished answer and duplicates none.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from actors.deploy import needs_for_benchmark
from medagent.config import RunConfig, SuiteConfig, SuiteRunConfig
from medagent.config.legacy import upgrade_manifest
from medagent.data import load_benchmark
from medagent.llm.endpoints import Endpoints
from medagent.run import RunDir, check_resume
from pipelines.benchmark_run import (
    RESUMABLE_KEYS,
    absolute_paths,
    run_config,
    uses_retrieval,
)
from pipelines.benchmark_run import run as run_cell
from pipelines.common import deploy, log, ray_session, setup_logging
from pipelines.common import register_configs as register_run_configs

SUITE_JSON = "suite.json"


class SuiteStopped(RuntimeError):
    """A cell failed and ``suite.continue_on_error`` is false; the cells finished so far are kept."""


@dataclass
class Cell:
    """One run of the suite: its hydra overrides (shared + swept) and the composed config."""

    overrides: list[str]
    cfg: RunConfig
    # What distinguishes this cell from the others (the swept overrides), for logs and the summary.
    label: str = ""
    status: str = "pending"  # pending | done | skipped | failed | not run
    predictions: int = 0  # lines in predictions.jsonl after the suite
    answered: int = 0  # of which written by this invocation
    accuracy: float | None = None
    error: str | None = None


def expand_sweep(sweep_params: Mapping[str, Any], overrides: Sequence[str]) -> list[list[str]]:
    """One override list per cell, with hydra's own multirun semantics (``BasicSweeper``).

    The experiment's params come first and the overrides after: a key given in both takes the override's
    value(s) (``benchmark=medqa`` narrows the sweep; a comma list, possible through this function, sweeps),
    and the cells are the cartesian product in that key order. Reusing the sweeper's splitter keeps the
    cells identical to the jobs of ``run_benchmark -m``.
    """
    from actors.private_apis import split_sweep

    params = [f"{k}={v}" for k, v in sweep_params.items()]
    return split_sweep([*params, *overrides])


def _is_suite_override(override: str) -> bool:
    """``suite.*`` configures the suite itself; ``conf/config.yaml`` (a cell) has no such node."""
    key = override.split("=", 1)[0].lstrip("+~")
    return key == "suite" or key.startswith("suite.")


def plan(
    sweep_params: Mapping[str, Any], task_overrides: Sequence[str], hydra_overrides: Sequence[str] = ()
) -> list[Cell]:
    """The suite's cells, each composed from ``conf/config.yaml`` (needs an initialized hydra: inside
    ``hydra.main`` or ``initialize_config_dir``).

    Args:
        sweep_params: ``hydra.sweeper.params`` of the composed suite config (the experiment's sweep).
        task_overrides: The command line's overrides (``suite.*`` ones are dropped for the cells).
        hydra_overrides: ``hydra.*`` overrides (e.g. ``hydra.searchpath``), passed to every cell's compose.
    """
    from hydra import compose

    shared = [o for o in task_overrides if not _is_suite_override(o)]
    lists = expand_sweep(sweep_params, shared)
    cells = []
    for overrides in lists:
        cfg = compose(config_name="config", overrides=[*hydra_overrides, *overrides])
        cells.append(Cell(overrides, absolute_paths(OmegaConf.to_object(cfg))))  # type: ignore[arg-type]
    # Label a cell by the overrides that differ between cells (all of them for a one-cell suite).
    varying = {i for i in range(len(lists[0])) if len({tuple(x)[i] for x in lists}) > 1} if lists else set()
    for cell in cells:
        cell.label = " ".join(o for i, o in enumerate(cell.overrides) if i in varying or not varying)
    _check_run_dirs(cells)
    return cells


def plan_from_overrides(overrides: Sequence[str]) -> tuple[SuiteRunConfig, list[Cell]]:
    """Composes ``conf/run_suite.yaml`` with ``overrides`` and plans its cells (tests and notebooks; needs an
    initialized hydra, e.g. ``initialize_config_dir``)."""
    from hydra import compose

    register_configs()
    cfg = compose(config_name="run_suite", overrides=list(overrides), return_hydra_config=True)
    params = sweep_params(cfg.hydra)
    hydra_ov = [o for o in overrides if o.lstrip("+~").startswith("hydra.")]
    task = [o for o in overrides if o not in hydra_ov]
    suite_cfg = compose(config_name="run_suite", overrides=list(overrides))
    return OmegaConf.to_object(suite_cfg), plan(params, task, hydra_ov)  # type: ignore[return-value]


def sweep_params(hydra_cfg: Any) -> dict[str, str]:
    """``hydra.sweeper.params`` (what an experiment sweeps: ``{"benchmark": "medqa,pubmedqa", ...}``)."""
    params = hydra_cfg.sweeper.get("params") or {}
    return {str(k): str(v) for k, v in params.items()}


def _check_run_dirs(cells: Sequence[Cell]) -> None:
    """Resuming needs one fixed folder per cell: a missing or shared run_dir would re-answer or mix cells."""
    seen: dict[str, str] = {}
    for c in cells:
        if not c.cfg.run_dir:
            raise ValueError(
                f"cell [{c.label}] has no run_dir: a suite needs one folder per cell, as the experiments "
                "set it (run_dir=${outputs_root}/experiments/<name>/${llm.name}/${benchmark.name}-...)"
            )
        if c.cfg.run_dir in seen:
            raise ValueError(f"cells [{seen[c.cfg.run_dir]}] and [{c.label}] share run_dir={c.cfg.run_dir}")
        seen[c.cfg.run_dir] = c.label


def suite_dir(cells: Sequence[Cell], configured: str | None = None) -> Path:
    """``configured``, else the deepest folder holding every cell's run dir (never a run dir itself)."""
    if configured:
        return Path(configured).resolve()
    dirs = [str(c.cfg.run_dir) for c in cells]
    common = Path(os.path.commonpath(dirs))
    return common.parent if str(common) in dirs else common


def _count_predictions(cfg: RunConfig) -> int:
    return len(RunDir(str(cfg.run_dir), read_only=True).completed_ids())


def is_complete(cfg: RunConfig) -> bool:
    """Every question of the cell is answered and ``metrics.json`` was written after the last answer."""
    rd = RunDir(str(cfg.run_dir), read_only=True)
    if not (rd.metrics.exists() and rd.predictions.exists()):
        return False
    if rd.metrics.stat().st_mtime_ns < rd.predictions.stat().st_mtime_ns:
        return False  # stopped between its last answer and its scoring: run() re-scores it
    data = load_benchmark(cfg.benchmark.loader, cfg.data_root, limit=cfg.limit, **cfg.benchmark.options)
    done = rd.completed_ids()
    if not all(q.id in done for q, _ in data.pairs):
        return False
    if cfg.resume_check:  # a finished cell asked for under other settings (or index) is refused, not skipped
        config = run_config(cfg)
        check_resume(
            upgrade_manifest(rd.read_json(rd.manifest)),
            config,
            RESUMABLE_KEYS,
            run_dir=str(rd.root),
            answered=len(done),
        )
    return True


def deployment_groups(cells: Sequence[Cell]) -> list[tuple[RunConfig, list[Cell]]]:
    """Cells grouped by what must be served for them, each group to be deployed once.

    Cells that share the LLM and the cluster share one deployment: the serving application of their first
    searching cell (its LLM also serves the cells that do not search), or the LLM alone when none searches.
    Searching cells that need another retriever, reranker or index get their own deployment.
    """

    def base(cfg: RunConfig) -> str:
        return json.dumps(
            {"llm": asdict(cfg.llm), "cluster": asdict(cfg.cluster)}, sort_keys=True, default=str
        )

    def search(cfg: RunConfig) -> str | None:
        if not uses_retrieval(cfg):
            return None
        parts = {"retriever": asdict(cfg.retriever), "reranker": asdict(cfg.reranker), "index": cfg.index_dir}
        return json.dumps(parts, sort_keys=True, default=str)

    first_search: dict[str, str] = {}
    for c in cells:
        s = search(c.cfg)
        if s is not None:
            first_search.setdefault(base(c.cfg), s)
    groups: dict[tuple[str, str | None], list[Cell]] = {}
    for c in cells:
        key = (base(c.cfg), search(c.cfg) or first_search.get(base(c.cfg)))
        groups.setdefault(key, []).append(c)
    out = []
    for group in groups.values():
        served = next((c.cfg for c in group if uses_retrieval(c.cfg)), group[0].cfg)
        out.append((served, group))
    return out


def _undeploy() -> None:
    """Frees the previous group's applications before the next is deployed (they would hold CPUs/GPUs)."""
    from ray import serve

    from actors.builder import APP, LLM_APP, retrieval_app_name

    live = serve.status().applications
    for name in (APP, retrieval_app_name(APP), LLM_APP):
        if name in live:
            serve.delete(name)


def _run_cell(cell: Cell, endpoints: Endpoints, continue_on_error: bool) -> None:
    before = _count_predictions(cell.cfg)
    log.info("cell [%s] -> %s", cell.label, cell.cfg.run_dir)
    try:
        result = run_cell(
            cell.cfg, endpoints if uses_retrieval(cell.cfg) else replace(endpoints, services=None)
        )
    except Exception as exc:  # recorded first; re-raised unless continue_on_error
        cell.status, cell.error = "failed", f"{type(exc).__name__}: {exc}"
        cell.predictions = _count_predictions(cell.cfg)
        cell.answered = cell.predictions - before
        if not continue_on_error:
            raise SuiteStopped(
                f"suite stopped: cell [{cell.label}] failed: {cell.error}\nFinished answers are kept in "
                f"{cell.cfg.run_dir} and the other cells' run dirs; rerun the same command to resume once the "
                "cause is fixed (suite.continue_on_error=true runs the remaining cells anyway)."
            ) from exc
        log.error("cell [%s] failed (continue_on_error): %s", cell.label, cell.error)
        return
    cell.status, cell.accuracy = "done", result.get("accuracy")
    cell.predictions = _count_predictions(cell.cfg)
    cell.answered = cell.predictions - before


def format_summary(cells: Sequence[Cell]) -> str:
    width = max([len(c.label) for c in cells] + [4])
    header = f"{'cell':<{width}}  {'status':<8} {'predictions':>11} {'new':>5} {'accuracy':>8}  run dir"
    lines = [header, "-" * len(header)]
    for c in cells:
        acc = f"{c.accuracy:.3f}" if c.accuracy is not None else "-"
        lines.append(
            f"{c.label:<{width}}  {c.status:<8} {c.predictions:>11} {c.answered:>5} {acc:>8}  {c.cfg.run_dir}"
        )
    counts = {s: sum(c.status == s for c in cells) for s in ("done", "skipped", "failed", "not run")}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" of {len(cells)} cells")
    return "\n".join(lines)


def write_report(cells: Sequence[Cell], out: Path, print_tables: bool) -> Path | None:
    """``pipelines.report``'s tables and figures over the cells that have predictions."""
    from actors.scoring import open_scorer
    from medagent.report import ReportOptions, build_report
    from medagent.report.build import REPORT, printable

    runs = [
        str(c.cfg.run_dir) for c in cells if RunDir(str(c.cfg.run_dir), read_only=True).predictions.exists()
    ]
    if not runs:
        return None
    first = cells[0].cfg
    opts = ReportOptions(bootstrap_samples=first.bootstrap_samples, seed=first.seed)
    report = build_report(runs, out, opts, lambda: open_scorer(first.open_scoring))
    if print_tables:
        print(printable(report))
    return out / REPORT


def run_suite(suite: SuiteConfig, cells: list[Cell]) -> dict[str, Any]:
    """Runs the cells (skipping complete ones) on one Ray session and one deployment per group, then writes
    ``suite.json`` and the report into the suite dir; returns the summary.

    Raises:
        SuiteStopped: a cell failed and ``suite.continue_on_error`` is false.
    """
    out = suite_dir(cells, suite.dir)
    start = time.perf_counter()
    for c in cells:
        if is_complete(c.cfg):
            rd = RunDir(str(c.cfg.run_dir), read_only=True)
            c.status, c.predictions = "skipped", _count_predictions(c.cfg)
            c.accuracy = (rd.read_json(rd.metrics) or {}).get("accuracy")
            log.info(
                "cell [%s] is complete (%d predictions in %s): skipped", c.label, c.predictions, c.cfg.run_dir
            )
    pending = [c for c in cells if c.status == "pending"]
    if suite.dry_run:
        for c in pending:
            c.status, c.predictions = "not run", _count_predictions(c.cfg)
        print(format_summary(cells) + f"\nsuite dir: {out} (dry run: nothing ran)")
        return {"suite_dir": str(out), "cells": [_cell_record(c) for c in cells]}
    log.info("suite: %d cells, %d to run, suite dir %s", len(cells), len(pending), out)
    try:
        if pending:
            with ray_session(pending[0].cfg.cluster):
                for i, (served, group) in enumerate(deployment_groups(pending)):
                    if i:
                        _undeploy()
                    endpoints = deploy(needs_for_benchmark(served))
                    for cell in group:
                        _run_cell(cell, endpoints, suite.continue_on_error)
    finally:
        for c in cells:
            if c.status == "pending":
                c.status = "not run"
        summary = {
            "suite_dir": str(out),
            "wall_s": round(time.perf_counter() - start, 1),
            "cells": [_cell_record(c) for c in cells],
        }
        out.mkdir(parents=True, exist_ok=True)
        (out / SUITE_JSON).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        print("\n" + format_summary(cells))
    if suite.report:
        report = write_report(cells, out / "report", suite.print_report)
        summary["report"] = str(report) if report else None
        print(f"\nreport: {report}" if report else "\nreport: no cell has predictions")
        (out / SUITE_JSON).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _cell_record(c: Cell) -> dict[str, Any]:
    return {"cell": c.label, "overrides": c.overrides, "run_dir": c.cfg.run_dir, "status": c.status,
            "predictions": c.predictions, "answered": c.answered, "accuracy": c.accuracy, "error": c.error}  # fmt: skip


def register_configs() -> None:
    """The suite's schema, and the run schema that each cell's ``conf/config.yaml`` lists first."""
    register_run_configs()
    ConfigStore.instance().store(name="suite_schema", node=SuiteRunConfig)


register_configs()


@hydra.main(config_path="../conf", config_name="run_suite", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    setup_logging()
    hc = HydraConfig.get()
    suite_cfg: SuiteRunConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    cells = plan(sweep_params(hc), list(hc.overrides.task), list(hc.overrides.hydra))
    try:
        summary = run_suite(suite_cfg.suite, cells)
    except SuiteStopped as exc:
        log.error("%s", exc)
        sys.exit(1)
    if any(c["status"] == "failed" for c in summary["cells"]):
        sys.exit(1)  # continue_on_error ran the other cells; the job still failed


if __name__ == "__main__":
    main()
