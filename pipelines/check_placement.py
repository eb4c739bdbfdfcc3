"""Can this cluster hold this run? ``python -m pipelines.check_placement cluster=paper_node_l40s
llm=qwen2.5-72b-instruct-awq agent=full`` starts (or joins) Ray as the run would, prints what the run asks
for and places it on the nodes Ray reports (``actors.placement``); exits 1 naming what is missing. Deploys
nothing: every run makes the same check itself before it deploys (``pipelines.common.deploy``).
"""

from __future__ import annotations

import sys
import time

import hydra
from omegaconf import DictConfig, OmegaConf

from actors.deploy import needs_for_benchmark
from actors.placement import PlacementError, check_placement, cluster_nodes, describe
from medagent.config import RunConfig
from pipelines.common import ray_session, register_configs, setup_logging

register_configs()


def check(cfg: RunConfig) -> bool:
    """Prints the run's demands and whether the joined cluster holds them."""
    needs = needs_for_benchmark(cfg)
    with ray_session(cfg.cluster):
        start = time.perf_counter()
        nodes = cluster_nodes()
        print(f"cluster={cfg.cluster.name} llm={cfg.llm.name}; nodes:")
        for n in nodes:
            print(f"  {n.name}: CPU {n.resources.get('CPU', 0):g}, GPU {len(n.gpus)}")
        print("asks for:\n  " + describe(needs).replace("\n", "\n  "))
        try:
            check_placement(needs)
        except PlacementError as exc:
            print(f"REFUSED in {time.perf_counter() - start:.2f}s: {exc}")
            return False
        print(f"placement OK in {time.perf_counter() - start:.2f}s")
        return True


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    setup_logging()
    if not check(OmegaConf.to_object(cfg)):  # type: ignore[arg-type]
        sys.exit(1)


if __name__ == "__main__":
    main()
