"""Integration tier: one real local Ray cluster per test session (starting Ray costs seconds)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from medagent.config import ClusterConfig


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def cluster_cfg() -> ClusterConfig:
    return ClusterConfig(num_cpus=4, http_port=_free_port(), batch_size=2, num_workers=1)


@pytest.fixture(scope="session")
def ray_cluster(cluster_cfg: ClusterConfig) -> Iterator[Any]:
    from actors.builder import ray_init_kwargs

    kwargs = ray_init_kwargs(cluster_cfg)
    assert os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0"
    import ray

    ray.init(**kwargs)
    from ray import serve

    serve.start(http_options={"host": cluster_cfg.http_host, "port": cluster_cfg.http_port})
    yield ray
    serve.shutdown()
    ray.shutdown()
