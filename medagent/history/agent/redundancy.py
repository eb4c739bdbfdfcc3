"""Redundancy control: a proposed question is blocked (never asked) when it repeats the interview.

Three checks, in this order (the first that fires is the reason recorded):

1. ``verbatim``: the same text as an asked question after lower-casing and dropping punctuation;
2. ``slot_filled``: the slot the question asks about already holds a value;
3. ``semantic``: embedding cosine similarity >= the threshold (paper: 0.75) with an asked question.

The embedder is injected (``TextEmbedder``): sentence-transformers MiniLM in production
(``SentenceEmbedder`` over ``medagent.retrieval.embedders.Embedder``), a fake in unit tests.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from medagent.history.agent.state import NO_SLOT, InterviewState


@runtime_checkable
class TextEmbedder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, d)`` vectors, one per text (normalisation not required: cosine is computed here)."""
        ...


class SentenceEmbedder:
    """``TextEmbedder`` over the project's sentence-transformers ``Embedder`` (query encoder)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    @classmethod
    def from_config(cls, cfg: Any, device: str | None = None) -> SentenceEmbedder:
        """Loads the model of an ``EmbedderConfig`` (e.g. ``conf/embedder/minilm.yaml``) once."""
        from medagent.retrieval.embedders import Embedder

        return cls(Embedder(cfg, device=device))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embedder.encode_queries(list(texts)), dtype=np.float32)


def normalise_text(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``a`` with every row of ``b`` (zero vectors give 0)."""
    na = np.linalg.norm(a, axis=1, keepdims=True)
    nb = np.linalg.norm(b, axis=1, keepdims=True)
    a = np.divide(a, na, out=np.zeros_like(a), where=na > 0)
    b = np.divide(b, nb, out=np.zeros_like(b), where=nb > 0)
    return np.asarray(a @ b.T)


@dataclass(frozen=True)
class Verdict:
    """``reason`` is None when the question may be asked."""

    reason: str | None = None
    similar_to: str = ""
    similarity: float = 0.0

    @property
    def ok(self) -> bool:
        return self.reason is None


class RedundancyChecker:
    """Applies the three checks against a state's asked questions and filled slots.

    Args:
        embedder: Encodes questions; None disables the semantic check (recorded by the caller).
        threshold: Cosine similarity at or above which a question is a semantic repeat.
    """

    def __init__(self, embedder: TextEmbedder | None, threshold: float = 0.75) -> None:
        self.embedder = embedder
        self.threshold = threshold
        self._cache: dict[str, np.ndarray] = {}

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        assert self.embedder is not None
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            for t, v in zip(missing, self.embedder.encode(missing), strict=True):
                self._cache[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def check(self, state: InterviewState, question: str, slot: str) -> Verdict:
        asked = [q.text for q in state.asked]
        norm = normalise_text(question)
        for text in asked:
            if normalise_text(text) == norm:
                return Verdict("verbatim", text, 1.0)
        if slot != NO_SLOT and slot in state.slots:
            return Verdict("slot_filled", f"{slot} = {state.slots[slot].value}", 0.0)
        if self.embedder is not None and asked:
            sims = cosine_matrix(self._vectors([question]), self._vectors(asked))[0]
            j = int(np.argmax(sims))
            if float(sims[j]) >= self.threshold:
                return Verdict("semantic", asked[j], float(sims[j]))
        return Verdict()


def redundant_share(questions: Sequence[str], embedder: TextEmbedder | None, threshold: float) -> float:
    """Share of questions that repeat an earlier one (verbatim, or cosine >= threshold); 0 for none.

    Used by the evaluation on what was actually asked (a baseline has no redundancy control).
    """
    if not questions:
        return 0.0
    norms = [normalise_text(q) for q in questions]
    repeat = [norms[i] in norms[:i] for i in range(len(norms))]
    if embedder is not None and len(questions) > 1:
        sims = cosine_matrix(*(2 * (np.asarray(embedder.encode(list(questions)), dtype=np.float32),)))
        for i in range(1, len(questions)):
            repeat[i] = repeat[i] or bool((sims[i, :i] >= threshold).any())
    return sum(repeat) / len(questions)
