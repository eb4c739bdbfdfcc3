"""Open-ended scoring placed by resources: the actor's options, and the remote scorer as a TextScorer."""

from __future__ import annotations

from typing import Any

from actors.scoring import GIB, RemoteScorer, scoring_actor_options
from medagent.config import OpenScoringConfig
from medagent.eval import OpenScorer, score_open_ended
from medagent.types import Gold, Prediction


def test_gpu_scoring_asks_for_gpus_and_memory() -> None:
    cfg = OpenScoringConfig(num_gpus=1, num_cpus=2, memory_gb=48)
    assert scoring_actor_options(cfg) == {"num_gpus": 1, "num_cpus": 2, "memory": 48 * GIB}
    assert "memory" not in scoring_actor_options(OpenScoringConfig(num_gpus=1))


class _Method:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> Any:
        return self.fn(*args)


class _FakeActor:
    """Stands in for the Ray actor handle: ``.method.remote(...)`` returns the value itself."""

    def __init__(self, scorer: OpenScorer) -> None:
        self.metric_names = _Method(scorer.metric_names)
        self.models = _Method(scorer.models)
        self.score_pairs = _Method(scorer.score_pairs)


class _Identity:
    def encode(self, texts: Any) -> Any:
        import numpy as np

        return np.array([[1.0, float(len(t))] for t in texts])


def test_a_remote_scorer_scores_like_the_local_one() -> None:
    local = OpenScorer({"e": _Identity()})
    remote = RemoteScorer(_FakeActor(local))
    remote._get = lambda ref: ref  # type: ignore[method-assign]
    preds = [
        Prediction(id="q1", benchmark="b", answer="aspirin"),
        Prediction(id="q2", benchmark="b", answer="x"),
    ]
    golds = {
        "q1": Gold(id="q1", answer="A", answer_text="aspirin"),
        "q2": Gold(id="q2", answer="B", answer_text="yy"),
    }
    a = score_open_ended(preds, golds, scorer=local, bootstrap_samples=10)
    b = score_open_ended(preds, golds, scorer=remote, bootstrap_samples=10)
    assert a == b and a["models"] == {"embedders": ["e"], "bertscore": None, "bertscore_num_layers": None}
