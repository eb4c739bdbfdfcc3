"""A multi-node Ray cluster on this machine: ``python -m pipelines.sim_cluster`` (``make sim-cluster``).

Starts a head and one worker node per node group of ``cluster.sim_nodes`` (``conf/cluster/sim_multi_node.yaml``:
the LLM, retrieval and CPU groups of ``multi_node``, with their custom resources and logical GPUs), all on
127.0.0.1 with token authentication, and keeps them up until Ctrl-C or SIGTERM, when it stops every node. Any
pipeline then joins it with ``cluster=sim_multi_node``, and ``pipelines.submit --address
http://127.0.0.1:<dashboard_port>`` submits jobs to it as to a real cluster.

A node whose raylet dies (``kill -9`` of the pid in the state file: a lost machine) is replaced after
``replace_delay_s`` by a fresh node of the same group, as KubeRay replaces a lost worker pod; 0 leaves it
gone. The state file (``state_file``) names each node's pid, node id and metrics port, and is rewritten on
every change. Every port is fixed by the config and checked free before a node starts: nodes on one machine
share its port space, and a dashboard agent that cannot bind its port runs on without HTTP, which leaves the
job server unable to run any job.

Nodes are ``ray.cluster_utils.Cluster`` nodes rather than ``ray start`` processes: ``ray start`` rewrites
127.0.0.1 to the machine's network address, and refuses to join a head that listens on loopback only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from medagent.config import ClusterConfig, SimNodeConfig
from pipelines.common import log, setup_logging

GIB = 1024**3
MIB = 1024**2
# ray._private.node.Node gives a worker node's raylet a fixed 30 s to register with the GCS; the raylet
# registers once its dashboard agent reports its port, which on two loaded cores can take longer.
_STARTUP_TIMEOUT = "timed out during startup"
NODE_START_ATTEMPTS = 3

T = TypeVar("T")


@dataclass
class SimClusterConfig:
    """What ``conf/sim_cluster.yaml`` composes."""

    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    # Rewritten whenever a node starts or is lost: address, dashboard, and per node its pid and node id.
    state_file: str = "outputs/sim_cluster/state.json"
    # Seconds before a lost node is replaced by a new node of its group; 0: never.
    replace_delay_s: float = 10.0
    # Ray's session root for these nodes (default: Ray's own, /tmp/ray).
    temp_dir: str | None = None


def _ensure_token(auth_mode: str | None) -> None:
    """Token mode for every node and driver started from here; a token is generated once if none exists."""
    if auth_mode != "token":
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return
    if not (Path.home() / ".ray" / "auth_token").exists():
        ray_cli = Path(sys.executable).with_name("ray")
        subprocess.run([str(ray_cli), "get-auth-token", "--generate"], check=True, capture_output=True)


def _node_args(node: SimNodeConfig, temp_dir: str | None) -> dict[str, Any]:
    args: dict[str, Any] = {
        "node_name": node.name,
        "num_cpus": node.num_cpus,
        "num_gpus": node.num_gpus,
        "resources": dict(node.resources),
        "memory": int(node.memory_gb * GIB),
        "object_store_memory": node.object_store_mb * MIB,
    }
    if node.metrics_export_port:
        args["metrics_export_port"] = node.metrics_export_port
    if node.dashboard_agent_port:
        args["dashboard_agent_listen_port"] = node.dashboard_agent_port
    if temp_dir:
        args["temp_dir"] = temp_dir
    return args


def _node_ports(node: SimNodeConfig) -> dict[str, int]:
    ports = {"metrics": node.metrics_export_port, "dashboard agent": node.dashboard_agent_port}
    return {f"{node.name}'s {what}": port for what, port in ports.items() if port}


def cluster_ports(cluster: ClusterConfig) -> dict[str, int]:
    """Every fixed port the simulated cluster binds on 127.0.0.1, by what binds it."""
    ports = {"GCS": int(str(cluster.ray.address).rsplit(":", 1)[1]), "Serve HTTP": cluster.serve.http_port}
    if cluster.ray.dashboard_port:
        ports["dashboard"] = cluster.ray.dashboard_port
    for node in cluster.sim_nodes:
        ports.update(_node_ports(node))
    return ports


def _in_use(port: int) -> bool:
    """Whether a socket listens on the port. SO_REUSEADDR, as the servers binding it set: a lost node's
    closed connections linger in TIME_WAIT for a minute and must not count as taken."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def kill_strays(keep: set[int]) -> int:
    """Kills this process's children outside ``keep`` (the processes of the nodes that are up) and everything
    they started; returns how many processes. A node that fails to start raises before
    ``ray.cluster_utils`` has a handle on its processes, which are this process's children: its raylet (with
    the agents and workers under it), and for the head its GCS and dashboard."""
    import psutil

    found = []
    for child in psutil.Process().children():
        if child.pid in keep:
            continue
        with contextlib.suppress(psutil.NoSuchProcess):
            found += [child, *child.children(recursive=True)]
    for proc in found:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(found, timeout=10)
    return len(found)


def check_ports_free(ports: dict[str, int], wait_s: float = 0.0) -> None:
    """Raises, naming each one, if a port is still taken after ``wait_s`` (a lost node's processes may
    take a few seconds to let go of theirs)."""
    deadline = time.monotonic() + wait_s
    while True:
        taken = {what: port for what, port in ports.items() if _in_use(port)}
        if not taken or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    if taken:
        listed = ", ".join(f"{port} ({what})" for what, port in taken.items())
        raise RuntimeError(
            f"port(s) in use on 127.0.0.1: {listed}. Another Ray or simulated cluster may hold them (`ray "
            "status`); stop it, or choose other ports in conf/cluster/sim_multi_node.yaml or on the command "
            "line (cluster.ray.dashboard_port=..., cluster.sim_nodes.<i>.dashboard_agent_port=...)."
        )


class SimCluster:
    """The running nodes; ``start`` brings them up, ``supervise`` replaces lost ones, ``stop`` ends them all."""

    def __init__(self, cluster: ClusterConfig, state_file: Path, temp_dir: str | None = None) -> None:
        if not cluster.sim_nodes:
            raise ValueError(f"cluster={cluster.name} has no sim_nodes; use cluster=sim_multi_node")
        if not cluster.ray.address or ":" not in cluster.ray.address:
            raise ValueError(
                f"cluster.ray.address must be 127.0.0.1:<port> for the head, got {cluster.ray.address!r}"
            )
        self.cfg = cluster
        self.state_file = state_file
        self.temp_dir = temp_dir
        self.nodes: dict[str, Any] = {}
        self.raylet_pids: dict[str, int] = {}
        self.restarts: dict[str, int] = {n.name: 0 for n in cluster.sim_nodes}
        self.lost: dict[str, float] = {}
        self._cluster: Any = None
        self._lock = threading.Lock()

    def start(self) -> None:
        # Both are read when ray is imported: loopback addresses, and the token for every node.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        _ensure_token(self.cfg.ray.auth_mode)
        # Jobs run `python -m pipelines...` (pipelines.submit): on these nodes that is this environment's
        # Python, as the image's is on a real cluster.
        bin_dir = str(Path(sys.executable).parent)
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
        from ray._common.utils import get_ray_address_file
        from ray.cluster_utils import Cluster

        head, *workers = self.cfg.sim_nodes
        head_args = _node_args(head, self.temp_dir)
        head_args.update(
            gcs_server_port=int(self.cfg.ray.address.rsplit(":", 1)[1]),  # type: ignore[union-attr]
            include_dashboard=True,
            dashboard_host="127.0.0.1",
        )
        if self.cfg.ray.dashboard_port:
            head_args["dashboard_port"] = self.cfg.ray.dashboard_port
        check_ports_free(cluster_ports(self.cfg))
        start = time.perf_counter()
        # The head records itself in /tmp/ray/ray_current_cluster, which every address-less ray.init on the
        # machine then joins (and still names once these nodes are gone): put back what was there.
        current = Path(get_ray_address_file(None))
        previous = current.read_text() if current.exists() else None
        head_ports = {"GCS": head_args["gcs_server_port"], **_node_ports(head)}
        if self.cfg.ray.dashboard_port:
            head_ports["dashboard"] = self.cfg.ray.dashboard_port
        self._cluster = self._start(
            head, head_ports, lambda: Cluster(initialize_head=True, head_node_args=head_args)
        )
        if previous is None:
            current.unlink(missing_ok=True)
        else:
            current.write_text(previous)
        self._register(head.name, self._cluster.head_node)
        self._wait_agent(head)
        # One node at a time, each with its agent up: agents starting together on two cores are what
        # keeps a raylet from registering in time.
        for node in workers:
            self._add_node(node)
        self._cluster.wait_for_nodes()
        self.write_state()
        log.info("simulated cluster up in %.1fs:\n%s", time.perf_counter() - start, self.describe())

    def node_temp_dir(self, spec: SimNodeConfig) -> str | None:
        """The head's session root is ``temp_dir`` (Ray's default when unset); every other node gets its own
        beneath it, as each machine of a real cluster has its own disk. Shared, one node's runtime-env agent
        re-extracts a job's working_dir (``overwrite=True``) while another node's driver imports from it."""
        if spec.name == self.cfg.sim_nodes[0].name:
            return self.temp_dir
        from ray._common.utils import get_default_ray_temp_dir

        return os.path.join(self.temp_dir or get_default_ray_temp_dir(), f"node-{spec.name}")

    def _add_node(self, spec: SimNodeConfig) -> None:
        """Starts a worker node and waits for its agent."""
        args = _node_args(spec, self.node_temp_dir(spec))
        node = self._start(spec, _node_ports(spec), lambda: self._cluster.add_node(**args))
        self._register(spec.name, node)
        self._wait_agent(spec)

    def _start(self, spec: SimNodeConfig, ports: dict[str, int], start: Callable[[], T]) -> T:
        """``start()``, again while it fails because the node's raylet did not register within Ray's fixed 30 s
        (its agents still starting on a loaded machine): what the failed try started is killed first, and its
        ports awaited. Any other failure raises at once."""
        for attempt in range(1, NODE_START_ATTEMPTS + 1):
            try:
                return start()
            except Exception as e:
                if _STARTUP_TIMEOUT not in str(e) or attempt == NODE_START_ATTEMPTS:
                    raise
                killed = kill_strays(self._node_pids())
                log.warning(
                    "node %s did not register in time (try %d of %d: %s); killed the %d process(es) it had "
                    "started, starting it again", spec.name, attempt, NODE_START_ATTEMPTS, e, killed,
                )  # fmt: skip
                check_ports_free(ports, wait_s=30.0)
        raise AssertionError("unreachable")

    def _node_pids(self) -> set[int]:
        return {
            info.process.pid
            for name, node in self.nodes.items()
            if name not in self.lost
            for infos in node.all_processes.values()
            for info in infos
        }

    def _wait_agent(self, spec: SimNodeConfig, timeout_s: float = 60.0) -> None:
        """Waits for the node's dashboard agent to serve HTTP: without the head's, the job server answers
        every submission with "No available agent"."""
        if not spec.dashboard_agent_port:
            return
        deadline = time.monotonic() + timeout_s
        while not _listening(spec.dashboard_agent_port):
            if time.monotonic() > deadline:
                logs = Path(self.nodes[spec.name].get_session_dir_path()) / "logs"
                raise RuntimeError(
                    f"the {spec.name} node's dashboard agent is not listening on port "
                    f"{spec.dashboard_agent_port} after {timeout_s:g}s; see {logs}/dashboard_agent*.log"
                )
            time.sleep(0.5)

    def _register(self, name: str, node: Any) -> None:
        self.nodes[name] = node
        self.raylet_pids[name] = int(node.all_processes["raylet"][0].process.pid)

    def _spec(self, name: str) -> SimNodeConfig:
        return next(n for n in self.cfg.sim_nodes if n.name == name)

    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.cfg.ray.dashboard_port}" if self.cfg.ray.dashboard_port else ""

    def state(self) -> dict[str, Any]:
        nodes = {}
        for spec in self.cfg.sim_nodes:
            node = self.nodes.get(spec.name)
            nodes[spec.name] = {
                "alive": node is not None and spec.name not in self.lost,
                "node_id": node.node_id if node is not None else None,
                "raylet_pid": self.raylet_pids.get(spec.name),
                "metrics_export_port": spec.metrics_export_port,
                "dashboard_agent_port": spec.dashboard_agent_port,
                "restarts": self.restarts[spec.name],
                "spec": asdict(spec),
            }
        return {
            "address": self.cfg.ray.address,
            "dashboard": self.dashboard_url(),
            "serve_http": f"http://{self.cfg.serve.http_host}:{self.cfg.serve.http_port}",
            "pid": os.getpid(),
            "nodes": nodes,
        }

    def write_state(self) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state(), indent=1))
        os.replace(tmp, self.state_file)

    def describe(self) -> str:
        lines = [f"  {'node':<10} {'CPU':>4} {'GPU':>4}  {'resources':<22} {'metrics':>7}  node id"]
        for spec in self.cfg.sim_nodes:
            node = self.nodes.get(spec.name)
            res = json.dumps(spec.resources) if spec.resources else "-"
            lines.append(
                f"  {spec.name:<10} {spec.num_cpus:>4g} {spec.num_gpus:>4g}  {res:<22} "
                f"{spec.metrics_export_port or '-'!s:>7}  {node.node_id[:12] if node else 'lost'}"
            )
        lines += [
            f"  address {self.cfg.ray.address}   dashboard {self.dashboard_url()}   state {self.state_file}",
            f"  join: python -m pipelines.<pipeline> cluster={self.cfg.name} ...",
            f"  submit: python -m pipelines.submit <pipeline> cluster={self.cfg.name} ... "
            f"--address {self.dashboard_url()}",
        ]
        return "\n".join(lines)

    def check_nodes(self, replace_delay_s: float) -> None:
        """Marks nodes whose raylet died as lost (cleaning up what is left of them) and, ``replace_delay_s``
        later, starts a new node of the same group."""
        with self._lock:
            now = time.monotonic()
            for name, node in list(self.nodes.items()):
                if name in self.lost or name == self.cfg.sim_nodes[0].name:
                    continue
                raylet = node.all_processes.get("raylet")
                if not raylet or raylet[0].process.poll() is not None:
                    log.warning("node %s (%s) lost: its raylet exited", name, node.node_id[:12])
                    node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
                    self._cluster.worker_nodes.discard(node)
                    self.lost[name] = now
                    self.write_state()
            for name, since in list(self.lost.items()):
                if replace_delay_s > 0 and now - since >= replace_delay_s:
                    spec = self._spec(name)
                    check_ports_free(_node_ports(spec), wait_s=30.0)
                    self._add_node(spec)
                    self.restarts[name] += 1
                    del self.lost[name]
                    self.write_state()
                    log.info("node %s replaced: %s", name, self.nodes[name].node_id[:12])

    def supervise(self, replace_delay_s: float, stop: threading.Event, poll_s: float = 1.0) -> None:
        while not stop.wait(poll_s):
            self.check_nodes(replace_delay_s)

    def stop(self) -> None:
        if self._cluster is not None:
            with self._lock:
                self._cluster.shutdown()
            self._cluster = None
        self.state_file.unlink(missing_ok=True)
        log.info("simulated cluster stopped")


def run(cfg: SimClusterConfig) -> None:
    """Starts the cluster, replaces lost nodes, stops everything on Ctrl-C / SIGTERM."""
    sim = SimCluster(cfg.cluster, Path(cfg.state_file).resolve(), cfg.temp_dir)
    stop = threading.Event()

    def _stop(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping the simulated cluster", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        sim.start()
        sim.supervise(cfg.replace_delay_s, stop)
    finally:
        sim.stop()


ConfigStore.instance().store(name="sim_cluster_schema", node=SimClusterConfig)


@hydra.main(config_path="../conf", config_name="sim_cluster", version_base="1.3")
def main(cfg: DictConfig) -> None:
    setup_logging()
    run(OmegaConf.to_object(cfg))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
