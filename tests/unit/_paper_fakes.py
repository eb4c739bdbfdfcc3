"""Fake runs on the QA paper's USMLE items, for the report's paper tables: each arm answers right exactly as
many items as the paper's published accuracy counts (82.98 % = 78/94 ...), the ablations on subsets of the
full agent's right items, the standalone arm as the lab's stored 72B answers. Fakes for tests and for showing
the report's layout; no model ran.

    python -m tests.unit._paper_fakes /tmp/paper_fakes   # writes runs/ and report/ there, prints report.md
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

from medagent.config import BenchmarkConfig, LLMConfig, RunConfig
from medagent.config.recipe import departures
from medagent.data import load_benchmark
from medagent.data.paper import item_index
from medagent.report.published import load_lab_reference
from medagent.run import RunDir
from medagent.types import Gold, Prediction
from tests.configs import agent_config

# Right answers per arm and step: the paper's counts (Table 1, Table 3, Fig. 3's stated points).
COUNTS = {
    1: {"full": 78, "no_tools": 77, "no_cache_prune": 77, "no_search": 76, "full@4": 80},
    2: {"full": 94, "no_tools": 90, "no_cache_prune": 91, "no_search": 90, "full@8": 96},
    3: {"full": 108, "no_tools": 102, "no_cache_prune": 104, "no_search": 100},
}
LLM = "fake-llm"


def _wrong(gold: Gold, options: dict[str, str]) -> str:
    return next(k for k in sorted(options) if k != gold.answer)


def _write(root: Path, step: int, arm: str, right: set[str], pairs: list, top_r: int) -> None:
    mode = arm.split("@")[0]
    bench = f"usmle_step{step}_paper"
    cfg = RunConfig(
        benchmark=BenchmarkConfig(name=bench, loader=bench),
        agent=agent_config(mode=mode, top_r=top_r),
        llm=LLMConfig(name=LLM),
    )
    config = json.loads(json.dumps(asdict(cfg), default=str))
    rd = RunDir(root / f"{bench}-{mode}-r{top_r}")
    rd.write_json(rd.manifest, {"config": config, "git_sha": None, "departures": departures(config)})
    rd.write_golds(g for _, g in pairs)
    rd.append_predictions(
        Prediction(id=q.id, benchmark=bench, answer=g.answer if q.id in right else _wrong(g, q.options))
        for q, g in pairs
    )


def write_paper_runs(root: Path, data_root: Path | None = None, seed: int = 0) -> list[Path]:
    """Writes the fake runs under ``root``; returns their folders."""
    rng = np.random.default_rng(seed)
    lab = load_lab_reference(data_root) if data_root is not None else None
    for step, counts in COUNTS.items():
        pairs = load_benchmark(f"usmle_step{step}_paper", data_root).pairs
        ids = [q.id for q, _ in pairs]
        full = set(rng.choice(ids, counts["full"], replace=False))
        for arm, k in counts.items():
            if arm == "full":
                right = full
            elif k > counts["full"]:  # a TopR of Fig. 3 above the full agent's: its right items and more
                right = full | set(rng.choice(sorted(set(ids) - full), k - counts["full"], replace=False))
            else:  # an ablation: a subset of the full agent's right items
                right = set(rng.choice(sorted(full), k, replace=False))
            _write(root, step, arm, right, pairs, int(arm.split("@")[1]) if "@" in arm else 32)
        if lab is not None:
            stored = lab.correct.get(("72B", step), {})
            right = {q.id for q, _ in pairs if stored.get(item_index(q.id), 0) == 1}  # type: ignore[arg-type]
            _write(root, step, "standalone", right, pairs, 32)
    return sorted(p for p in root.iterdir() if p.is_dir())


if __name__ == "__main__":
    from medagent.data import resolve_data_root
    from medagent.report.build import ReportOptions, build_report

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/paper_fakes")
    write_paper_runs(out / "runs", resolve_data_root())
    report = build_report([str(out / "runs")], out / "report", ReportOptions(compute_open_ended=False))
    print(report.markdown)
