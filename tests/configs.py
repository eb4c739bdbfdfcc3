"""Config builders for tests: the QA agent's and the history-taking agent's settings named as single keys
(``top_r=4``, ``max_replacements=0``), placed into the groups of ``AgentConfig`` and ``HistoryAgentConfig`` by the
same maps that read older run manifests (``medagent.config.legacy``); the cluster's former flat keys
(``http_port=8000``) placed into ``ClusterConfig``'s groups."""

from __future__ import annotations

from typing import Any

from medagent.config import (
    AgentConfig,
    ClusterConfig,
    ClusterLLMConfig,
    ClusterServeConfig,
    IndexingConfig,
    RayInitConfig,
    RetrievalPlacementConfig,
    WorkerPoolConfig,
)
from medagent.config.interview import (
    HistoryAgentConfig,
    HistoryGenerationConfig,
    HistoryRetrievalConfig,
    PhasesConfig,
    QuestioningConfig,
    RedundancyConfig,
    SingleShotConfig,
)
from medagent.config.legacy import AGENT_MOVES, HISTORY_AGENT_MOVES
from medagent.config.qa import FinalAnswerConfig, QARetrievalConfig, SamplingConfig, ToolLoopConfig

GROUPS = {
    "sampling": SamplingConfig,
    "answer": FinalAnswerConfig,
    "loop": ToolLoopConfig,
    "retrieval": QARetrievalConfig,
}


def agent_config(**settings: Any) -> AgentConfig:
    """An ``AgentConfig`` from flat keyword settings; group names (``gate=``) pass through as they are."""
    top: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    for key, value in settings.items():
        if key in AGENT_MOVES:
            group, leaf = AGENT_MOVES[key].split(".")
            grouped.setdefault(group, {})[leaf] = value
        else:
            top[key] = value
    return AgentConfig(**top, **{g: GROUPS[g](**kw) for g, kw in grouped.items()})


# Former flat ``ClusterConfig`` keys -> their path in its groups (the cluster is never compared on resume, so
# no run manifest needs them moved: this map only serves tests that name settings flat).
CLUSTER_MOVES: dict[str, str] = {
    **{
        k: f"ray.{k}"
        for k in (
            "address",
            "num_cpus",
            "loopback_only",
            "include_dashboard",
            "dashboard_port",
            "worker_niceness",
            "metrics_export_port",
            "runtime_env",
            "auth_mode",
        )
    },
    **{k: f"serve.{k}" for k in ("http_host", "http_port", "ingress_num_cpus", "autoscaling")},
    **{f"serve_{k}": f"serve.{k}" for k in ("proxy_location", "log_level", "same_loop", "direct_ingress")},
    **{
        f"llm_{k}": f"llm.{k}"
        for k in (
            "replicas",
            "num_cpus",
            "num_gpus",
            "max_ongoing_requests",
            "placement_strategy",
            "bundle",
            "resources",
            "accelerator_type",
        )
    },
    "keep_llm_app": "llm.keep_app",
    "num_workers": "workers.count",
    "worker_num_cpus": "workers.num_cpus",
    "worker_num_gpus": "workers.num_gpus",
    "batch_size": "workers.batch_size",
    **{
        k: f"indexing.{k}"
        for k in ("embed_workers", "embed_num_cpus", "embed_num_gpus", "embed_threads", "prepare_num_cpus")
    },
    **{
        f"{part}_{k}": f"retrieval.{part}_{k}"
        for part in ("retriever", "reranker")
        for k in ("replicas", "num_cpus", "num_gpus")
    },
    "retriever_threads": "retrieval.retriever_threads",
    "retrieval_resources": "retrieval.resources",
}

CLUSTER_GROUPS = {
    "ray": RayInitConfig,
    "serve": ClusterServeConfig,
    "llm": ClusterLLMConfig,
    "workers": WorkerPoolConfig,
    "indexing": IndexingConfig,
    "retrieval": RetrievalPlacementConfig,
}


def cluster_config(**settings: Any) -> ClusterConfig:
    """A ``ClusterConfig`` from flat keyword settings (``http_port=8000``); ``name`` and ``sim_nodes`` pass
    through as they are."""
    top: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    for key, value in settings.items():
        if key in CLUSTER_MOVES:
            group, leaf = CLUSTER_MOVES[key].split(".")
            grouped.setdefault(group, {})[leaf] = value
        else:
            top[key] = value
    return ClusterConfig(**top, **{g: CLUSTER_GROUPS[g](**kw) for g, kw in grouped.items()})


HISTORY_GROUPS = {
    "questioning": QuestioningConfig,
    "phases": PhasesConfig,
    "redundancy": RedundancyConfig,
    "generation": HistoryGenerationConfig,
    "retrieval": HistoryRetrievalConfig,
    "single_shot": SingleShotConfig,
}


def history_agent_config(**settings: Any) -> HistoryAgentConfig:
    """A ``HistoryAgentConfig`` from flat keyword settings under their former names (``policy=``,
    ``retrieval=False``), placed into the groups by ``HISTORY_AGENT_MOVES``."""
    top: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    for key, value in settings.items():
        if key in HISTORY_AGENT_MOVES:
            group, leaf = HISTORY_AGENT_MOVES[key].split(".")
            grouped.setdefault(group, {})[leaf] = value
        else:
            top[key] = value
    return HistoryAgentConfig(**top, **{g: HISTORY_GROUPS[g](**kw) for g, kw in grouped.items()})
