import numpy as np
import pytest
from pydantic import ValidationError

from medagent.api import MAX_QUERY_CHARS, RerankCandidate, RerankRequest, RetrieveRequest
from medagent.config import RerankerConfig
from medagent.retrieval.rerank import EmbeddingReranker

VOCAB = ["asthma", "inhaler", "knee", "surgery", "fever"]


def _bow(texts: list[str], is_query: bool) -> np.ndarray:
    vecs = np.array([[t.lower().count(w) for w in VOCAB] for t in texts], dtype=np.float32) + 1e-3
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def test_rerank_orders_by_similarity_and_keeps_top_r() -> None:
    calls: list[int] = []

    def enc(texts: list[str], is_query: bool) -> np.ndarray:
        calls.append(len(texts))
        return _bow(texts, is_query)

    rr = EmbeddingReranker(RerankerConfig(top_r=2), encoder=enc)
    cands = [
        RerankCandidate(id="k", text="knee surgery"),
        RerankCandidate(id="a", text="asthma inhaler"),
        RerankCandidate(id="f", text="fever and asthma"),
    ]
    out = rr.rerank_many([("asthma inhaler", cands), ("knee", cands[:1])])
    assert list(out[0]) == ["a", "f"]
    assert list(out[1]) == ["k"]  # fewer candidates than top_r
    assert calls == [2, 4]  # one pass for all queries, one for all candidates
    assert list(rr.rerank("fever", cands, top_r=1)) == ["f"]
    with pytest.raises(ValueError):
        rr.rerank("x", cands, top_r=0)


def test_wire_limits() -> None:
    assert RetrieveRequest(query="q").top_k == 32
    for bad in ({"query": ""}, {"query": "x" * (MAX_QUERY_CHARS + 1)}, {"query": "q", "top_k": 0},
                {"query": "q", "mode": "psychic"}, {"query": "q", "unexpected": 1}):  # fmt: skip
        with pytest.raises(ValidationError):
            RetrieveRequest.model_validate(bad)
    with pytest.raises(ValidationError):
        RerankRequest.model_validate({"query": "q", "candidates": []})
