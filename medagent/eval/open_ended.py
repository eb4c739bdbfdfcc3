"""Open-ended scoring: a free-text answer against the gold answer text (the QA paper, Table 2).

Metrics, one score per question:

* ``cosine/<model>``: cosine similarity of the answer's and the reference's embeddings, one metric per
  configured embedder (paper: SFR-Embedding-2_R and gte-Qwen2-7B-instruct; CPU: mpnet and MiniLM).
* ``bertscore_f1``: BERTScore F1 (``bert-score`` on a local model folder at a fixed layer, no baseline
  rescaling; paper: microsoft/deberta-xlarge-mnli).

The reference is ``Gold.answer_text`` (for a multiple-choice set run open-ended, the gold option's text),
else ``Gold.explanation``; questions whose gold has neither are left out and counted in ``no_reference``.
Declared failure score: an ``INVALID`` or empty answer and an errored question score 0 on every metric and
are counted (``invalid``, ``errors``). Predictions are joined to golds by id here, as in ``scoring``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from medagent.config import ModelConfig, OpenScoringConfig
from medagent.eval.stats import bootstrap_ci
from medagent.types import INVALID, Gold, Prediction

log = logging.getLogger(__name__)

BERTSCORE = "bertscore_f1"


def cosine_metric(embedder_name: str) -> str:
    """The metric name of cosine similarity under one embedder."""
    return f"cosine/{embedder_name}"


class TextEmbedder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, d)`` vectors, one per text (normalisation not required: cosine is computed here)."""
        ...


class PairScorer(Protocol):
    def score(self, candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        """One score per (candidate, reference) pair."""
        ...


def _device(device: str | None) -> str:
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class SentenceTransformerEmbedder:
    """A sentence-transformers model resolved through ``medagent.models``, loaded once."""

    def __init__(
        self,
        model: ModelConfig,
        *,
        max_seq_length: int | None = None,
        batch_size: int = 32,
        device: str | None = None,
        **kwargs: Any,
    ) -> None:
        from medagent.retrieval.embedders import load_sentence_transformer

        self.batch_size = batch_size
        self._model = load_sentence_transformer(model, None, max_seq_length, _device(device), **kwargs)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._model.encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


class BertScoreF1:
    """BERTScore F1 with ``bert-score`` on a local model folder (no baseline rescaling), loaded once."""

    def __init__(
        self, model_path: str, num_layers: int, batch_size: int = 16, device: str | None = None
    ) -> None:
        from bert_score import BERTScorer

        self._scorer = BERTScorer(
            model_type=model_path, num_layers=num_layers, batch_size=batch_size, device=_device(device)
        )

    def score(self, candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        if not candidates:
            return []
        _p, _r, f1 = self._scorer.score(list(candidates), list(references))
        return [float(x) for x in f1.tolist()]


def row_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of row i of ``a`` with row i of ``b`` (a zero vector gives 0)."""
    num = np.sum(a * b, axis=1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.divide(num, den, out=np.zeros_like(num, dtype=np.float64), where=den > 0)


class TextScorer(Protocol):
    """What scoring needs of the models: ``OpenScorer`` in this process, or a proxy for one held by a Ray
    actor on a GPU node (``actors.scoring``)."""

    def metric_names(self) -> list[str]: ...

    def score_pairs(self, candidates: Sequence[str], references: Sequence[str]) -> dict[str, list[float]]: ...

    def models(self) -> dict[str, Any]: ...


@dataclass
class OpenScorer:
    """The loaded scoring models: embedders by metric-facing name, and an optional BERTScore scorer."""

    embedders: dict[str, TextEmbedder]
    bertscore: PairScorer | None = None
    bertscore_name: str | None = None
    bertscore_num_layers: int | None = None

    @classmethod
    def from_config(cls, cfg: OpenScoringConfig) -> OpenScorer:
        """Loads every configured model (local path -> PyPI-shipped copy -> hub)."""
        embedders: dict[str, TextEmbedder] = {}
        for m in cfg.embedders:
            name = m.name or m.hub_id or m.pypi or m.local_path or "embedder"
            embedders[name] = SentenceTransformerEmbedder(
                m,
                max_seq_length=cfg.max_seq_length,
                batch_size=cfg.batch_size,
                device=cfg.device,
                **cfg.embedder_kwargs,
            )
            log.info("open-ended scoring: embedder %s loaded", name)
        bert: PairScorer | None = None
        if cfg.bertscore_model is not None:
            from medagent.models import resolve_model

            path = resolve_model(cfg.bertscore_model.spec())
            bert = BertScoreF1(str(path), cfg.bertscore_num_layers, cfg.bertscore_batch_size, cfg.device)
        return cls(
            embedders,
            bert,
            cfg.bertscore_model.name if cfg.bertscore_model else None,
            cfg.bertscore_num_layers if cfg.bertscore_model else None,
        )

    def metric_names(self) -> list[str]:
        return [cosine_metric(n) for n in self.embedders] + ([BERTSCORE] if self.bertscore else [])

    def models(self) -> dict[str, Any]:
        """The models behind the metrics, as ``score_open_ended`` records them."""
        return {
            "embedders": list(self.embedders),
            "bertscore": self.bertscore_name if self.bertscore else None,
            "bertscore_num_layers": self.bertscore_num_layers if self.bertscore else None,
        }

    def score_pairs(self, candidates: Sequence[str], references: Sequence[str]) -> dict[str, list[float]]:
        """Every metric on aligned (candidate, reference) pairs."""
        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
        out: dict[str, list[float]] = {}
        if not candidates:
            return {m: [] for m in self.metric_names()}
        # Each distinct text is encoded once (references repeat across questions of a yes/no set).
        texts = sorted(set(candidates) | set(references))
        index = {t: i for i, t in enumerate(texts)}
        ci = [index[t] for t in candidates]
        ri = [index[t] for t in references]
        for name, embedder in self.embedders.items():
            vectors = np.asarray(embedder.encode(texts), dtype=np.float64)
            out[cosine_metric(name)] = [float(x) for x in row_cosine(vectors[ci], vectors[ri])]
        if self.bertscore is not None:
            out[BERTSCORE] = self.bertscore.score(candidates, references)
        return out


def reference_text(gold: Gold) -> str:
    """The text an open-ended answer is compared with: the gold option's text, else the explanation."""
    return (gold.answer_text or gold.explanation or "").strip()


def _summary(values: list[float], bootstrap_samples: int, seed: int) -> dict[str, Any]:
    n = len(values)
    mean = sum(values) / n if n else 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    lo, hi = bootstrap_ci(values, bootstrap_samples, seed)
    return {"mean": mean, "sd": sd, "ci95": [lo, hi]}


def score_open_ended(
    predictions: Iterable[Prediction],
    golds: Mapping[str, Gold],
    cfg: OpenScoringConfig | None = None,
    *,
    scorer: TextScorer | None = None,
    bootstrap_samples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Scores free-text predictions against the gold text.

    Args:
        predictions: One per question id (later duplicates are ignored).
        golds: Gold labels by id; golds with no prediction are counted in ``missing``.
        cfg: Models to load when ``scorer`` is not given.
        scorer: Already loaded models (reused across runs; a fake in tests).

    Returns:
        ``{"n", "invalid", "errors", "invalid_rate", "error_rate", "no_reference", "missing", "metrics",
        "models"}`` where ``metrics`` maps each metric name to ``{"mean", "sd", "ci95"}`` over the ``n``
        scored questions (invalid and errored ones count as 0).
    """
    if scorer is None:
        if cfg is None:
            raise ValueError("score_open_ended needs a scorer or an OpenScoringConfig")
        scorer = OpenScorer.from_config(cfg)
    seen: set[str] = set()
    failed: list[bool] = []
    candidates: list[str] = []
    references: list[str] = []
    invalid = errors = no_reference = 0
    for p in predictions:
        if p.id in seen or p.id not in golds:
            continue
        seen.add(p.id)
        ref = reference_text(golds[p.id])
        if not ref:
            no_reference += 1
            continue
        answer = p.answer.strip()
        if p.error:
            errors += 1
        elif answer in ("", INVALID):
            invalid += 1
        bad = bool(p.error) or answer in ("", INVALID)
        failed.append(bad)
        if not bad:
            candidates.append(answer)
            references.append(ref)
    scored = scorer.score_pairs(candidates, references)
    n = len(failed)
    metrics: dict[str, Any] = {}
    for name, values in scored.items():
        it = iter(values)
        # Failures get the declared score 0, in question order.
        per_question = [0.0 if bad else next(it) for bad in failed]
        metrics[name] = _summary(per_question, bootstrap_samples, seed)
    return {
        "n": n,
        "invalid": invalid,
        "errors": errors,
        "invalid_rate": invalid / n if n else 0.0,
        "error_rate": errors / n if n else 0.0,
        "no_reference": no_reference,
        "missing": len(set(golds) - seen),
        "metrics": metrics,
        "models": scorer.models(),
    }
