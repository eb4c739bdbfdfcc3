"""Ray worker niceness of a local cluster: set from the cluster config before ray.init, never on a remote one."""

from __future__ import annotations

import pytest

from actors.builder import ray_init_kwargs
from medagent.config import ClusterConfig
from tests.configs import cluster_config

VAR = "RAY_worker_niceness"


def test_a_local_cluster_gets_the_configured_worker_niceness(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR, "unset")  # recorded first, so the value the code sets is undone after the test
    monkeypatch.delenv(VAR)
    ray_init_kwargs(cluster_config(worker_niceness=0))
    import os

    assert os.environ[VAR] == "0"


def test_unset_or_remote_leaves_rays_default_and_an_explicit_variable_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    monkeypatch.setenv(VAR, "unset")  # recorded first, so the value the code sets is undone after the test
    monkeypatch.delenv(VAR)
    ray_init_kwargs(ClusterConfig())
    ray_init_kwargs(cluster_config(address="ray://head:10001", worker_niceness=0))
    assert VAR not in os.environ
    monkeypatch.setenv(VAR, "5")
    ray_init_kwargs(cluster_config(worker_niceness=0))
    assert os.environ[VAR] == "5"
