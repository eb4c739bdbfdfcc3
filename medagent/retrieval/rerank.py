"""Second-stage reranking (the QA paper): an embedding model scores each candidate against the query, TopR kept.

The paper reranks with gte-Qwen2-7B-instruct quantized to 4 bits; on CPU the same shape runs with mpnet.
Scores are cosine similarities of normalized embeddings (higher is better); results keep the BEIR shape
``query_id -> {doc_id: score}`` so fusion, reranking and metrics share one type. Candidates are the wire's
``RerankCandidate``, so the deployment hands a request's candidates over as they arrived.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np

from medagent.api import RerankCandidate
from medagent.config import RerankerConfig

log = logging.getLogger(__name__)
TextEncoder = Callable[[list[str], bool], np.ndarray]  # (texts, is_query) -> (n, dim) normalized


def load_text_encoder(cfg: RerankerConfig) -> TextEncoder:
    """The configured sentence-transformers model as ``(texts, is_query) -> normalized vectors``.

    Public so that an evaluation can cache document vectors across queries (a bi-encoder scores each
    candidate independently of the others).
    """
    from medagent.retrieval.embedders import load_sentence_transformer

    kwargs = dict(cfg.model_kwargs)
    if cfg.load_in_4bit:
        import torch
        from transformers import BitsAndBytesConfig

        kwargs["model_kwargs"] = {
            **kwargs.get("model_kwargs", {}),
            "quantization_config": BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
            ),
        }
    model = load_sentence_transformer(cfg.model, None, cfg.max_seq_length, cfg.device, **kwargs)
    log.info("reranker %s loaded (%s, 4-bit=%s)", cfg.name, cfg.model.name, cfg.load_in_4bit)

    def encode(texts: list[str], is_query: bool) -> np.ndarray:
        if is_query and cfg.query_prompt:
            texts = [cfg.query_prompt + t for t in texts]
        vecs = model.encode(
            texts,
            batch_size=cfg.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)

    return encode


class EmbeddingReranker:
    """Scores candidates by cosine similarity with the query; the model loads once.

    Args:
        cfg: Reranker configuration.
        encoder: Injected ``(texts, is_query) -> normalized vectors``; tests pass a fake, otherwise the
            configured sentence-transformers model is loaded.
    """

    def __init__(self, cfg: RerankerConfig, encoder: TextEncoder | None = None) -> None:
        self.cfg = cfg
        self._encode = encoder or load_text_encoder(cfg)

    def rerank_many(
        self, requests: Sequence[tuple[str, Sequence[RerankCandidate]]], top_r: int | None = None
    ) -> list[dict[str, float]]:
        """Reranks several queries in two forward passes (all queries, all candidates).

        Args:
            requests: ``(query, candidates)`` pairs.
            top_r: Candidates kept per query (default ``cfg.top_r``); fewer when fewer were given.

        Returns:
            One ``{doc_id: score}`` per request, best first.
        """
        keep = self.cfg.top_r if top_r is None else top_r
        if keep < 1:
            raise ValueError(f"top_r must be >= 1, got {keep}")
        if not requests:
            return []
        q_vecs = self._encode([q for q, _ in requests], True)
        texts = [c.text for _, cands in requests for c in cands]
        d_vecs = self._encode(texts, False) if texts else np.zeros((0, q_vecs.shape[1]), np.float32)
        out: list[dict[str, float]] = []
        start = 0
        for qi, (_, cands) in enumerate(requests):
            block = d_vecs[start : start + len(cands)]
            start += len(cands)
            scores = block @ q_vecs[qi]
            order = np.argsort(-scores, kind="stable")[:keep]
            out.append({cands[i].id: float(scores[i]) for i in order})
        return out

    def rerank(
        self, query: str, candidates: Sequence[RerankCandidate], top_r: int | None = None
    ) -> dict[str, float]:
        return self.rerank_many([(query, candidates)], top_r)[0]
