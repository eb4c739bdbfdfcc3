"""Can what a run asks for be placed on the cluster it joined? Checked before anything waits on resources.

Ray never refuses a request it cannot place: a vLLM replica whose TP=4 placement group needs four GPUs on a
one-GPU cluster, or a reranker pinned to a custom resource no node advertises, waits forever (Serve logs a
warning now and then). ``check_placement`` compares every deployment, placement group and worker pool of a
run (``actors.deploy.Needs``) with the nodes Ray reports, and raises ``PlacementError`` naming what is
missing. The arithmetic (``demands``, ``place``, ``llm_gpu_memory``) is pure and imports no Ray;
``check_placement`` only reads ``ray.nodes()``.

Ray's rules that the arithmetic follows: a resource request is placed on one node; a bundle of a STRICT_PACK
placement group goes on the same node as its siblings; a fractional GPU request (< 1) must fit in what is
left of ONE GPU, a request of n >= 1 GPUs takes n whole GPUs. Capacity is the nodes' totals, not what is
free now: a run that reuses a running LLM application counts it as its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medagent.config import ClusterConfig, LLMConfig, OpenScoringConfig

GPU = "GPU"
_EPS = 1e-9
# Ray's ``memory`` resource is in bytes; messages say GiB.
_GIB = 1024**3


class PlacementError(RuntimeError):
    """What a run asks for cannot be placed on the cluster it joined."""


@dataclass(frozen=True)
class Demand:
    """Resources that must be placed together: one actor, or the bundles of one placement group.

    Attributes:
        name: What asks (``LLM replica 1``, ``Reranker replica 1``, ``agent worker 3``).
        bundles: One resource dict per bundle; an actor is one bundle.
        same_node: Every bundle on one node (STRICT_PACK); else each bundle goes anywhere.
    """

    name: str
    bundles: tuple[Mapping[str, float], ...]
    same_node: bool = True


@dataclass
class NodeCapacity:
    """One node's totals, with its GPUs kept apart (a fractional GPU request fits in one of them)."""

    name: str
    resources: dict[str, float]
    gpus: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, name: str, resources: Mapping[str, float]) -> NodeCapacity:
        gpus = int(resources.get(GPU, 0) + _EPS)
        rest = {k: float(v) for k, v in resources.items() if k != GPU}
        return cls(name, rest, [1.0] * gpus)

    def copy(self) -> NodeCapacity:
        return NodeCapacity(self.name, dict(self.resources), list(self.gpus))

    def take(self, bundle: Mapping[str, float]) -> str | None:
        """Takes ``bundle`` from this node; returns None, or why it does not fit (the node is unchanged)."""
        short = [
            f"{k} {v:g} (has {self.resources.get(k, 0.0):g})"
            for k, v in bundle.items()
            if k != GPU and v > 0 and self.resources.get(k, 0.0) + _EPS < v
        ]
        gpu = float(bundle.get(GPU, 0.0))
        picked = _pick_gpus(self.gpus, gpu)
        if picked is None:
            free = ", ".join(f"{g:g}" for g in self.gpus) or "none"
            short.append(f"GPU {gpu:g} (free per GPU: {free})")
        if short:
            return "lacks " + "; ".join(short)
        for k, v in bundle.items():
            if k != GPU:
                self.resources[k] = self.resources.get(k, 0.0) - v
        for i, amount in picked or []:
            self.gpus[i] -= amount
        return None


def _pick_gpus(gpus: list[float], amount: float) -> list[tuple[int, float]] | None:
    """Which GPUs ``amount`` takes, Ray's way: a fraction from the fullest GPU that holds it (packing
    fractions together leaves whole GPUs for whole requests), n >= 1 as n untouched GPUs."""
    if amount <= 0:
        return []
    if amount < 1:
        fits = [i for i, free in enumerate(gpus) if free + _EPS >= amount]
        return [(min(fits, key=lambda i: gpus[i]), amount)] if fits else None
    whole = [i for i, free in enumerate(gpus) if free + _EPS >= 1.0]
    n = math.ceil(amount - _EPS)
    return [(i, 1.0) for i in whole[:n]] if len(whole) >= n else None


def _positive(resources: Mapping[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in resources.items() if v and v > 0}


def _actor(name: str, num_cpus: float, num_gpus: float = 0.0, **extra: Any) -> dict[str, float]:
    custom = extra.get("resources") or {}
    return _positive({"CPU": num_cpus, GPU: num_gpus, **custom, "memory": extra.get("memory", 0)})


def _replica_count(cluster: ClusterConfig, deployment: str, fixed: int) -> int:
    """Replicas that must be up before a run starts: autoscaling's floor where it applies, else ``fixed``."""
    auto = cluster.serve.autoscaling.get(deployment)
    if auto:
        return int(auto.get("min_replicas", auto.get("initial_replicas", 1)) or 0)
    return fixed


def llm_demands(llm: LLMConfig, cluster: ClusterConfig) -> list[Demand]:
    """The LLM application's replicas. vLLM (``ray.serve.llm``): a placement group of TP x PP bundles per
    replica (``cluster.llm.bundle`` plus ``cluster.llm.resources``), the replica actor's own CPU added to
    the first bundle, and the OpenAI ingress; llama.cpp: one actor per replica."""
    backend = str(getattr(llm.backend, "value", llm.backend))
    if backend == "openai":
        return []
    if backend == "llamacpp":
        one = _actor("llm", cluster.llm.num_cpus, cluster.llm.num_gpus)
        return [Demand(f"LLM replica {i + 1}", (one,)) for i in range(cluster.llm.replicas)]
    workers = llm.tensor_parallel_size * llm.pipeline_parallel_size
    bundle = _positive({**(cluster.llm.bundle or {GPU: 1.0}), **cluster.llm.resources})
    bundles = [dict(bundle) for _ in range(workers)]
    # ray.serve.llm merges the replica actor (its default 1 CPU) into the first bundle.
    bundles[0]["CPU"] = bundles[0].get("CPU", 0.0) + 1.0
    strict = str(getattr(cluster.llm.placement_strategy, "value", cluster.llm.placement_strategy))
    out = [
        Demand(
            f"LLM replica {i + 1} ({llm.name}: TP {llm.tensor_parallel_size} x PP {llm.pipeline_parallel_size})",
            tuple(bundles),
            same_node=strict == "STRICT_PACK",
        )
        for i in range(cluster.llm.replicas)
    ]
    out.append(Demand("LLM OpenAI ingress", (_actor("ingress", cluster.serve.ingress_num_cpus),)))
    return out


def serving_demands(
    cluster: ClusterConfig, *, retriever: bool, reranker: bool, ingress: bool
) -> list[Demand]:
    """The serving application's replicas (``actors.builder.serving_deployment_options``)."""
    r = cluster.retrieval
    out: list[Demand] = []
    if retriever or ingress:
        out += [
            Demand(f"Ingress replica {i + 1}", (_actor("ingress", cluster.serve.ingress_num_cpus),))
            for i in range(_replica_count(cluster, "Ingress", 1))
        ]
    if retriever:
        one = _actor("retriever", r.retriever_num_cpus, r.retriever_num_gpus, resources=r.resources)
        n = _replica_count(cluster, "Retriever", r.retriever_replicas)
        out += [Demand(f"Retriever replica {i + 1}", (one,)) for i in range(n)]
    if reranker:
        one = _actor("reranker", r.reranker_num_cpus, r.reranker_num_gpus, resources=r.resources)
        n = _replica_count(cluster, "Reranker", r.reranker_replicas)
        out += [Demand(f"Reranker replica {i + 1}", (one,)) for i in range(n)]
    return out


def worker_demands(cluster: ClusterConfig) -> list[Demand]:
    """The agent / interview worker pool (Ray Data's fixed-size actor pool)."""
    w = cluster.workers
    one = _actor("worker", w.num_cpus, w.num_gpus)
    return [Demand(f"agent worker {i + 1}", (one,)) for i in range(w.count)]


def scoring_demand(scoring: OpenScoringConfig) -> list[Demand]:
    """The open-ended scoring actor (``actors.scoring.open_scorer``); none when it runs in the driver."""
    if scoring.num_gpus <= 0:
        return []
    one = _actor("scoring", scoring.num_cpus, scoring.num_gpus, memory=scoring.memory_gb * _GIB)
    return [Demand("open-ended scoring actor", (one,))]


def place(wanted: Sequence[Demand], nodes: Sequence[NodeCapacity]) -> list[str]:
    """Places ``wanted`` on ``nodes`` first-fit; returns what could not be placed, one line each naming
    the demand and what each node lacks. Empty: everything fits.

    Order: the demand that fits on the fewest empty nodes first (a retriever pinned to ``retrieval_node``
    before a scoring actor that any GPU node takes, whatever order Ray lists the nodes in), then the largest
    GPU demand (whole-GPU placement groups must find untouched GPUs before fractions scatter over them).
    First-fit can still miss a packing that exists; our configs place each part by construction, so a miss
    here is a config to fix either way.
    """
    free = [n.copy() for n in nodes]
    order = sorted(wanted, key=lambda d: (_room(d, nodes), -sum(b.get(GPU, 0.0) for b in d.bundles)))
    missing: list[str] = []
    for demand in order:
        why = _place_one(demand, free)
        if why is not None:
            missing.append(why)
    return missing


def _room(demand: Demand, nodes: Sequence[NodeCapacity]) -> int:
    """On how many of ``nodes``, each empty, ``demand`` fits alone."""
    return sum(_place_one(demand, [n.copy()]) is None for n in nodes)


def _place_one(demand: Demand, free: list[NodeCapacity]) -> str | None:
    reasons: list[str] = []
    if demand.same_node:
        for node in free:
            trial = node.copy()
            why = next((w for w in (trial.take(b) for b in demand.bundles) if w), None)
            if why is None:
                node.resources, node.gpus = trial.resources, trial.gpus
                return None
            reasons.append(f"{node.name} {_short_in_total(demand, node) or why}")
        return _unplaced(demand, reasons)
    for b in demand.bundles:
        placed = False
        for node in free:
            why = node.take(b)
            if why is None:
                placed = True
                break
            reasons.append(f"{node.name} {why}")
        if not placed:
            return _unplaced(demand, reasons)
    return None


def _short_in_total(demand: Demand, node: NodeCapacity) -> str | None:
    """What ``node`` lacks for all of ``demand``'s bundles together (None: enough in total, but spread
    over its GPUs so that the bundles do not fit)."""
    total: dict[str, float] = {}
    for b in demand.bundles:
        for k, v in b.items():
            total[k] = total.get(k, 0.0) + v
    have = {**node.resources, GPU: sum(node.gpus)}
    short = [f"{k} {v:g} (has {have.get(k, 0.0):g})" for k, v in total.items() if have.get(k, 0.0) + _EPS < v]
    return "lacks " + "; ".join(short) if short else None


def _fmt(bundle: Mapping[str, float]) -> str:
    shown = {k: (f"{v / _GIB:.1f} GiB" if k == "memory" else f"{v:g}") for k, v in bundle.items()}
    return "{" + ", ".join(f"{k}: {v}" for k, v in shown.items()) + "}"


def _shown(node: NodeCapacity) -> dict[str, float]:
    """A node's resources as a message shows them: Ray's per-node markers and object store left out."""
    hidden = ("node:", "object_store_memory", "accelerator_type:")
    rest = {k: v for k, v in node.resources.items() if not k.startswith(hidden)}
    return {"CPU": rest.pop("CPU", 0.0), GPU: float(len(node.gpus)), **rest}


def _unplaced(demand: Demand, reasons: list[str]) -> str:
    shape = " + ".join(_fmt(b) for b in demand.bundles)
    where = "on one node" if demand.same_node and len(demand.bundles) > 1 else "on any node"
    return f"{demand.name} needs {shape} {where}: " + (" | ".join(reasons) or "the cluster has no nodes")


@dataclass(frozen=True)
class GpuMemory:
    """The LLM's memory per GPU: weights (bf16 or quantized, split over TP x PP) and one full-length
    conversation's KV cache, against the share vLLM may take (``gpu_memory_utilization``)."""

    weights_gb: float
    kv_full_context_gb: float
    overhead_gb: float
    budget_gb: float

    @property
    def kv_room_gb(self) -> float:
        return self.budget_gb - self.weights_gb - self.overhead_gb

    @property
    def fits(self) -> bool:
        return self.kv_room_gb >= self.kv_full_context_gb


def llm_gpu_memory(llm: LLMConfig, cluster: ClusterConfig) -> GpuMemory | None:
    """The per-GPU memory arithmetic of a vLLM replica, or None where the configs do not give the sizes
    (``llm.weights_gb``, ``llm.kv_bytes_per_token``, ``cluster.llm.gpu_memory_gb``).

    vLLM refuses to start when its KV cache cannot hold one ``max_model_len`` sequence; this is the same
    test, done before the weights are downloaded.
    """
    c = cluster.llm
    if not (llm.weights_gb and llm.kv_bytes_per_token and c.gpu_memory_gb):
        return None
    shards = llm.tensor_parallel_size * llm.pipeline_parallel_size
    util = float(c.gpu_memory_utilization or llm.engine_kwargs.get("gpu_memory_utilization", 0.9))
    # KV heads are split over TP ranks and layers over PP ranks: each GPU holds 1/shards of each token.
    kv = llm.max_model_len * llm.kv_bytes_per_token / shards / 1e9
    return GpuMemory(llm.weights_gb / shards, kv, c.gpu_overhead_gb, c.gpu_memory_gb * util)


def memory_shortfall(llm: LLMConfig, cluster: ClusterConfig) -> str | None:
    """Why the LLM does not fit its GPUs' memory, or None (also where the sizes are not configured)."""
    m = llm_gpu_memory(llm, cluster)
    if m is None or m.fits:
        return None
    return (
        f"LLM {llm.name} does not fit {cluster.name}'s {cluster.llm.gpu_memory_gb:g} GB GPUs: per GPU "
        f"{m.weights_gb:.1f} GB of weights + {m.overhead_gb:g} GB activations leave {m.kv_room_gb:.1f} GB of "
        f"the {m.budget_gb:.1f} GB vLLM may use, and one {llm.max_model_len}-token sequence needs "
        f"{m.kv_full_context_gb:.1f} GB of KV cache (use a quantized model, more GPUs, or a shorter max_model_len)"
    )


def run_demands(needs: Any) -> list[Demand]:
    """Every resource request of a run (``actors.deploy.Needs``)."""
    from actors.backends import backend

    out = llm_demands(needs.llm, needs.cluster) if backend(needs.llm).build_app is not None else []
    out += serving_demands(
        needs.cluster,
        retriever=needs.retriever is not None,
        reranker=needs.reranker is not None,
        ingress=needs.ingress,
    )
    out += worker_demands(needs.cluster)
    if needs.scoring is not None:
        out += scoring_demand(needs.scoring)
    return out


def placement_problems(needs: Any, nodes: Sequence[NodeCapacity]) -> list[str]:
    """What cannot be placed (resources on ``nodes``, and the LLM's GPU memory); empty when all fits."""
    problems = place(run_demands(needs), nodes)
    memory = memory_shortfall(needs.llm, needs.cluster)
    return problems + ([memory] if memory else [])


def describe(needs: Any) -> str:
    """What a run asks the cluster for, one line per demand (``pipelines.check_placement`` prints it)."""
    lines = [f"{d.name}: {' + '.join(_fmt(b) for b in d.bundles)}" for d in run_demands(needs)]
    m = llm_gpu_memory(needs.llm, needs.cluster)
    if m is not None:
        lines.append(
            f"LLM memory per GPU: {m.weights_gb:.1f} GB weights + {m.overhead_gb:g} GB overhead of {m.budget_gb:.1f} GB "
            f"leave {m.kv_room_gb:.1f} GB KV cache (one {needs.llm.max_model_len}-token sequence: "
            f"{m.kv_full_context_gb:.1f} GB)"
        )
    return "\n".join(lines)


def cluster_nodes() -> list[NodeCapacity]:
    """The alive nodes of the cluster this process joined, with their total resources."""
    import ray

    return [
        NodeCapacity.of(str(n.get("NodeName") or n["NodeID"][:8]), n.get("Resources", {}))
        for n in ray.nodes()
        if n.get("Alive")
    ]


def check_placement(needs: Any) -> None:
    """Raises ``PlacementError`` when ``needs`` cannot be placed on the joined cluster (skipped where
    ``cluster.placement_check`` is off: an autoscaled cluster starts the missing nodes on demand)."""
    if not needs.cluster.placement_check:
        return
    nodes = cluster_nodes()
    problems = placement_problems(needs, nodes)
    if problems:
        have = "; ".join(f"{n.name}: {_fmt(_shown(n))}" for n in nodes)
        raise PlacementError(
            f"cluster={needs.cluster.name} cannot hold this run (llm={needs.llm.name}); nothing was deployed.\n  "
            + "\n  ".join(problems)
            + f"\nNodes: {have}"
        )
