"""Tables and figures of the QA paper from run directories: ``python -m pipelines.report 'runs=[outputs/*/*]'``.

Loads every run named by ``runs`` (run dirs, glob patterns, or folders searched for runs), identifies each by
its manifest config (benchmark, agent mode, agent.retrieval.top_r, agent.open_ended, LLM) and writes Table 1-3, the
data and PNGs of Fig. 2a/2b and Fig. 3, cost and latency, and flip rates into ``out`` (default
``${outputs_root}/report/<timestamp>``): ``report.md``, one CSV per table, PNGs, ``summary.json`` and the
manifest. Open-ended runs without stored metrics are scored with the ``scoring`` models (cpu | gpu).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from medagent.config import ClusterConfig, OpenScoringConfig
from medagent.eval import TextScorer
from medagent.report import ReportOptions, build_report
from medagent.report.build import REPORT, printable
from medagent.run import RunDir, build_manifest
from pipelines.common import log, scoring_session, setup_logging


@dataclass
class ReportConfig:
    """What ``conf/report.yaml`` composes."""

    # Run directories, glob patterns (quote them in the shell), or folders to search for runs: a list, or
    # one string (typed Any so that `runs=outputs` works as well as `runs=[a,b]`).
    runs: Any = MISSING
    # Output folder; default ${outputs_root}/report/<timestamp>.
    out: str | None = None
    outputs_root: str = "outputs"
    open_scoring: OpenScoringConfig = field(default_factory=OpenScoringConfig)
    # Where scoring=gpu's actor runs (cluster=multi_gpu on a head without GPUs); unused on CPU scoring.
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    report: ReportOptions = field(default_factory=ReportOptions)
    print_tables: bool = True


def register_configs() -> None:
    ConfigStore.instance().store(name="report_schema", node=ReportConfig)


def run(cfg: ReportConfig) -> dict[str, Any]:
    """Builds the report; returns where it went and what it holds."""
    rd = RunDir.create(cfg.out, cfg.outputs_root, "report")
    rd.write_json(rd.manifest, build_manifest(asdict(cfg), [], rd.read_json(rd.manifest)))

    def scorer() -> TextScorer:
        from actors.scoring import open_scorer

        log.info("loading open-ended scoring models: %s", [m.name for m in cfg.open_scoring.embedders])
        return open_scorer(cfg.open_scoring)

    patterns = [cfg.runs] if isinstance(cfg.runs, str) else [str(p) for p in cfg.runs]
    with scoring_session(cfg.open_scoring, cfg.cluster):
        report = build_report(patterns, rd.root, cfg.report, scorer)
    if cfg.print_tables:
        print(printable(report))
    print(f"\nreport: {rd.root / REPORT}")
    return {
        "out": str(rd.root),
        "runs": [str(r.path) for r in report.runs],
        "figures": {k: str(v) if v else None for k, v in report.figures.items()},
    }


register_configs()


@hydra.main(config_path="../conf", config_name="report", version_base="1.3")
def main(cfg: DictConfig) -> None:
    setup_logging()
    report_cfg: ReportConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    if report_cfg.out:
        report_cfg.out = str(Path(report_cfg.out).resolve())
    run(report_cfg)


if __name__ == "__main__":
    main()
