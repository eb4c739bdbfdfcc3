"""Network analysis of annotations: ``python -m pipelines.analyze_network annotations=<run_dir|dialogs.json>``.

Reads annotations (a run dir of ``annotate_interviews``, a JSONL file, or MediTOD gold JSON), runs
``medagent.network.analysis.analyze`` with the null samples (NODF nulls and the optimised modularity nulls)
fanned out as Ray tasks (``actors.network_tasks.ray_map``), and writes tables, figures, ``report.md`` and
``summary.json`` into one run directory with its manifest and ``rejected.jsonl``.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from medagent.config import ClusterConfig
from medagent.network.analysis import NetworkAnalysisConfig, analyze
from medagent.network.inputs import load_annotations
from medagent.network.nulls import MapFn
from medagent.network.report import REPORT, write_report
from medagent.run import RunDir, build_manifest
from pipelines.common import log, ray_session, setup_logging


@dataclass
class AnalyzeNetworkConfig:
    """What ``conf/analyze_network.yaml`` composes."""

    annotations: str = MISSING
    run_dir: str | None = None
    outputs_root: str = "outputs"
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    network: NetworkAnalysisConfig = field(default_factory=NetworkAnalysisConfig)
    # False runs the null samples serially in the driver (identical numbers; no Ray needed).
    use_ray: bool = True
    null_task_num_cpus: float = 1.0


def register_configs() -> None:
    ConfigStore.instance().store(name="analyze_network_schema", node=AnalyzeNetworkConfig)


def _analyze_and_write(cfg: AnalyzeNetworkConfig, rd: RunDir, map_fn: MapFn) -> dict[str, Any]:
    loaded = load_annotations(cfg.annotations)
    n_rejected = rd.write_rejected(loaded.rejected)
    if n_rejected:
        log.warning("%d malformed annotation rows set aside in %s", n_rejected, rd.rejected)
    rd.write_json(rd.manifest, build_manifest(asdict(cfg), loaded.files, rd.read_json(rd.manifest)))
    if not loaded.annotations:
        raise ValueError(f"no usable annotation in {cfg.annotations}")
    log.info("network analysis of %d interviews from %s", len(loaded.annotations), cfg.annotations)
    summary = write_report(analyze(loaded.annotations, cfg.network, map_fn), rd.root)
    summary["rejected"] = n_rejected
    rd.write_json(rd.metrics, summary)
    return summary


def run(cfg: AnalyzeNetworkConfig) -> dict[str, Any]:
    """Runs the analysis end to end; returns the summary (also written to ``metrics.json``)."""
    rd = RunDir.create(cfg.run_dir, cfg.outputs_root, "network")
    if not cfg.use_ray:
        summary = _analyze_and_write(cfg, rd, map)
    else:
        with ray_session(cfg.cluster):
            from actors.network_tasks import ray_map

            summary = _analyze_and_write(cfg, rd, functools.partial(ray_map, num_cpus=cfg.null_task_num_cpus))
    print(f"\nreport: {rd.root / REPORT}")
    return {**summary, "run_dir": str(rd.root)}


register_configs()


@hydra.main(config_path="../conf", config_name="analyze_network", version_base="1.3")
def main(cfg: DictConfig) -> None:
    setup_logging()
    run_cfg: AnalyzeNetworkConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    # hydra.job.chdir is false, but resolve now so nothing downstream depends on the working directory.
    run_cfg.annotations = str(Path(run_cfg.annotations).resolve())
    if run_cfg.run_dir:
        run_cfg.run_dir = str(Path(run_cfg.run_dir).resolve())
    run(run_cfg)


if __name__ == "__main__":
    main()
