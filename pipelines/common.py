"""Shared driver-side helpers for the hydra entry points: config registration, logging, Ray lifecycle."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from hydra.core.config_store import ConfigStore

from actors.builder import ray_init_kwargs
from medagent.config import ClusterConfig, RunConfig

log = logging.getLogger("medagent")


def register_configs() -> None:
    """Registers the typed schema that ``conf/config.yaml`` lists first in its defaults."""
    ConfigStore.instance().store(name="run_schema", node=RunConfig)


def setup_logging(level: int = logging.INFO) -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Ray and llama.cpp are chatty at INFO; our own progress is what users want to read.
    for noisy in ("ray", "ray.data", "ray.serve", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@contextlib.contextmanager
def ray_session(cluster: ClusterConfig) -> Iterator[Any]:
    """Starts (or joins) Ray for the duration of a pipeline; leaves an already running session alone."""
    kwargs = ray_init_kwargs(cluster)  # sets loopback env vars before ray is imported
    import ray

    started = False
    if not ray.is_initialized():
        os.environ.setdefault("RAY_DEDUP_LOGS", "1")
        ray.init(**kwargs)
        started = True
        log.info("Ray started: %s", ray.cluster_resources())
    try:
        yield ray
    finally:
        if started:
            with contextlib.suppress(Exception):
                from ray import serve

                serve.shutdown()
            ray.shutdown()
