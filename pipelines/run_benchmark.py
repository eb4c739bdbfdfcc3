"""Run an agent on a benchmark: ``python -m pipelines.run_benchmark benchmark=medqa agent=standalone limit=20``.

The run itself (Ray Data over ``AgentWorker`` actors, resumable run dirs, scoring) is
``pipelines.benchmark_run.run``, shared with ``pipelines.run_suite``; this module is only its command line.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from pipelines.benchmark_run import absolute_paths, run
from pipelines.common import register_configs, setup_logging, usage_errors

register_configs()


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    setup_logging()
    with usage_errors():
        run(absolute_paths(OmegaConf.to_object(cfg)))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
