"""Open-ended scoring placed by resources: the scoring models live in a Ray actor that asks for the GPUs (and
memory) they need, so a driver on a head without GPUs (``cluster/kuberay/raycluster.yaml``) still scores
Table 2. ``open_scoring.num_gpus`` 0 keeps the models in the calling process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from medagent.config import OpenScoringConfig, to_dataclass
from medagent.eval import OpenScorer, TextScorer

GIB = 1024**3


class OpenScoringActor:
    """Holds the loaded scoring models; methods mirror ``OpenScorer``'s."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.scorer = OpenScorer.from_config(to_dataclass(OpenScoringConfig, cfg))

    def metric_names(self) -> list[str]:
        return self.scorer.metric_names()

    def models(self) -> dict[str, Any]:
        return self.scorer.models()

    def score_pairs(self, candidates: list[str], references: list[str]) -> dict[str, list[float]]:
        return self.scorer.score_pairs(candidates, references)

    def where(self) -> dict[str, Any]:
        """The node this actor runs on and the GPUs Ray gave it (logical ones on a simulated cluster)."""
        import ray

        ctx = ray.get_runtime_context()
        return {"node_id": ctx.get_node_id(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}


class RemoteScorer:
    """A ``TextScorer`` whose models live in an ``OpenScoringActor``; every call is one actor call."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def _get(self, ref: Any) -> Any:
        import ray

        return ray.get(ref)

    def metric_names(self) -> list[str]:
        return list(self._get(self.actor.metric_names.remote()))

    def models(self) -> dict[str, Any]:
        return dict(self._get(self.actor.models.remote()))

    def score_pairs(self, candidates: Sequence[str], references: Sequence[str]) -> dict[str, list[float]]:
        return dict(self._get(self.actor.score_pairs.remote(list(candidates), list(references))))

    def where(self) -> dict[str, Any]:
        return dict(self._get(self.actor.where.remote()))

    def close(self) -> None:
        import ray

        ray.kill(self.actor)


def scoring_actor_options(cfg: OpenScoringConfig) -> dict[str, Any]:
    """``ray.remote`` options of the scoring actor: the GPUs and memory the models need."""
    options: dict[str, Any] = {"num_gpus": cfg.num_gpus, "num_cpus": cfg.num_cpus}
    if cfg.memory_gb:
        options["memory"] = int(cfg.memory_gb * GIB)
    return options


def open_scorer(cfg: OpenScoringConfig) -> TextScorer:
    """The scorer ``cfg`` asks for: a ``RemoteScorer`` on a node with ``cfg.num_gpus`` GPUs (needs a Ray
    session), else the models loaded here."""
    if cfg.num_gpus <= 0:
        return OpenScorer.from_config(cfg)
    import ray

    actor_cls = ray.remote(**scoring_actor_options(cfg))(OpenScoringActor)
    return RemoteScorer(actor_cls.remote(asdict(cfg)))
