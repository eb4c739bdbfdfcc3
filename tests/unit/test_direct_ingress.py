"""Serve's direct ingress (cluster.serve.direct_ingress): the variable reaches a cluster this process starts,
never a running one, and the replica addresses are read from the controller's target groups."""

from __future__ import annotations

import os

import pytest

from actors.builder import direct_targets, ray_init_kwargs
from medagent.config import ClusterConfig
from tests.configs import cluster_config

VAR = "RAY_SERVE_ENABLE_DIRECT_INGRESS"


def test_set_for_a_local_cluster_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR, "unset")  # recorded first, so the value the code sets is undone after the test
    monkeypatch.delenv(VAR)
    ray_init_kwargs(ClusterConfig())  # off by default
    ray_init_kwargs(cluster_config(address="ray://head:10001", serve_direct_ingress=True))
    assert VAR not in os.environ
    ray_init_kwargs(cluster_config(serve_direct_ingress=True))
    assert os.environ[VAR] == "1"


def test_replica_targets_become_urls_and_the_proxy_group_is_left_out() -> None:
    from ray.serve._private.common import RequestProtocol
    from ray.serve.schema import Target, TargetGroup

    def group(app: str, protocol: RequestProtocol, port: int) -> TargetGroup:
        target = Target(ip="10.0.0.5", port=port, instance_id="i", name="n")
        return TargetGroup(targets=[target], route_prefix="/", protocol=protocol, app_name=app)

    groups = [
        group("medagent-retrieval", RequestProtocol.HTTP, 30001),
        group("medagent-retrieval", RequestProtocol.GRPC, 40001),
        group("", RequestProtocol.HTTP, 8000),  # the proxy's own group: no application
        TargetGroup(targets=[], route_prefix="/x", protocol=RequestProtocol.HTTP, app_name="starting"),
    ]
    assert direct_targets(groups) == {"medagent-retrieval": "http://10.0.0.5:30001"}
