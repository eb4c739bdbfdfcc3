"""The QA paper's cache-and-prune memory bank: one per question, outside the model's context window.

Retrieved documents wait in a queue; ``relevance_analysis`` moves the next batch of B into review;
``locate_evidence`` caches verified quotes from reviewed documents; a reviewed document that was never
grounded is pruned (its text dropped) when the next batch is opened or the question ends. At most
``ceil(R / B)`` batches are reviewed per question. The final answer sees the cached evidence only, never
the raw retrieved documents.

With ``keep_documents`` (``agent.loop.memory: documents``, the bank as the paper describes it: "stores the
grounded evidence", "removes documents that are not grounded") a grounded document is kept whole, and the
final answer reads those documents instead of the quotes alone.

The bank is plain data so an actor can keep ``question_id -> MemoryBank`` in its state and inspect it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from medagent.api import Doc

# Memory kinds (``agent.loop.memory``) that review documents in batches through this bank.
BANK_KINDS = frozenset({"cache_prune", "documents"})
# Quotes shorter than this (after normalisation) would match almost any document, so they never verify.
MIN_QUOTE_CHARS = 8
_ELLIPSIS = re.compile(r"\.\.\.+|…")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def normalize_text(text: str) -> str:
    """Casefolded, NFKC, every run of non-alphanumerics one space: how quotes are compared with documents.

    Models re-quote with different whitespace, quotes, dashes and case; those must not fail verification.
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    return _NON_ALNUM.sub(" ", text).strip()


def verify_quote(quote: str, doc: Doc) -> bool:
    """True when ``quote`` occurs in the document (title or content) after normalisation.

    An elided quote ("a ... b") verifies when every fragment occurs, in order.
    """
    haystack = normalize_text(f"{doc.title} {doc.content}")
    parts = [normalize_text(p) for p in _ELLIPSIS.split(quote)]
    parts = [p for p in parts if p]
    if not parts or sum(len(p) for p in parts) < MIN_QUOTE_CHARS:
        return False
    pos = 0
    for part in parts:
        found = haystack.find(part, pos)
        if found < 0:
            return False
        pos = found + len(part)
    return True


@dataclass(frozen=True)
class Evidence:
    """A span quoted from a document, as returned with the prediction.

    ``kind`` is ``grounded`` (quoted by ``locate_evidence``; ``verified`` says whether the quote was found
    in the document) or ``context`` (a whole document placed in the prompt by the ablations without the
    memory bank; ``quote`` is then the text the model saw).
    """

    handle: str
    doc_id: str
    source: str
    title: str
    quote: str
    verified: bool
    kind: str = "grounded"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Judgement:
    """The reviewer's verdict on one document (``relevant`` is None when it gave none)."""

    handle: str
    relevant: bool | None
    reason: str = ""


@dataclass
class MemoryBank:
    """Per-question queue, review state and evidence cache.

    Args:
        question_id: The question this bank belongs to.
        batch_size: B, documents per review batch.
        top_r: R, documents kept per search; bounds the review to ``ceil(R / B)`` batches.
        keep_documents: Keep each grounded document whole (``kept``), not only its quotes.
    """

    question_id: str
    batch_size: int = 4
    top_r: int = 32
    keep_documents: bool = False
    kept: dict[str, Doc] = field(default_factory=dict)
    queue: deque[str] = field(default_factory=deque)
    docs: dict[str, Doc] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    judgements: dict[str, Judgement] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    unverified: list[Evidence] = field(default_factory=list)
    grounded: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    in_context: list[Evidence] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    batches_reviewed: int = 0
    _seen: dict[tuple[str, str], str] = field(default_factory=dict)
    # Id, source and title of every queued document, without its text: what a quote is recorded
    # under once the document itself has been pruned.
    _meta: dict[str, Doc] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.top_r < 1:
            raise ValueError(f"batch_size and top_r must be >= 1, got {self.batch_size}, {self.top_r}")

    @property
    def max_batches(self) -> int:
        return math.ceil(self.top_r / self.batch_size)

    @property
    def batches_left(self) -> int:
        return max(0, self.max_batches - self.batches_reviewed)

    def enqueue(self, docs: list[Doc]) -> tuple[list[str], int]:
        """Queues new documents under short handles (D1, D2, ...); returns (handles, duplicates skipped).

        A document already seen for this question (same source and id) is not queued again, so repeated
        searches cannot make the model review the same text twice.
        """
        handles: list[str] = []
        duplicates = 0
        for doc in docs:
            key = (doc.source, doc.id)
            if key in self._seen:
                duplicates += 1
                continue
            handle = f"D{len(self._seen) + 1}"
            self._seen[key] = handle
            self.docs[handle] = doc
            self._meta[handle] = replace(doc, content="")
            self.queue.append(handle)
            handles.append(handle)
        return handles, duplicates

    def next_batch(self) -> list[str]:
        """Prunes the current batch's ungrounded documents, then opens the next batch of up to B.

        Returns [] when the queue is empty or the ``ceil(R / B)`` bound is reached (nothing changes then).
        """
        if not self.queue or self.batches_left == 0:
            return []
        self._prune_pending()
        batch = [self.queue.popleft() for _ in range(min(self.batch_size, len(self.queue)))]
        self.pending = batch
        self.batches_reviewed += 1
        return batch

    def doc(self, handle: str) -> Doc:
        """The full document behind a queued or pending handle (KeyError once pruned)."""
        return self.docs[handle]

    def is_reviewable(self, handle: str) -> bool:
        """Evidence may be located only in documents of the batch under review."""
        return handle in self.pending and handle in self.docs

    def judge(self, judgement: Judgement) -> None:
        self.judgements[judgement.handle] = judgement

    def cache(self, handle: str, quote: str, verified: bool) -> Evidence:
        """Records a quote from a reviewed document; only verified quotes ground the document."""
        doc = self._meta[handle]
        ev = Evidence(handle, doc.id, doc.source, doc.title, quote, verified)
        if verified:
            if all(e.quote != quote or e.handle != handle for e in self.evidence):
                self.evidence.append(ev)
            if handle not in self.grounded:
                self.grounded.append(handle)
        else:
            self.unverified.append(ev)
        return ev

    def add_context(self, handle: str, text: str) -> None:
        """Records a document shown whole to the model (ablations without cache-and-prune)."""
        doc = self._meta[handle]
        if handle in self.queue:
            self.queue.remove(handle)
        self.docs.pop(handle, None)
        self.in_context.append(Evidence(handle, doc.id, doc.source, doc.title, text, False, "context"))

    def grounded_documents(self) -> list[tuple[str, Doc]]:
        """The grounded documents held whole (``keep_documents``), in the order they were grounded."""
        held = {**self.kept, **{h: d for h, d in self.docs.items() if h in self.grounded}}
        return [(h, held[h]) for h in self.grounded if h in held] if self.keep_documents else []

    def finish(self) -> None:
        """Prunes the last batch and drops every held document text; the cached evidence (and, with
        ``keep_documents``, the grounded documents) stays."""
        self._prune_pending()
        self.docs.clear()

    def records(self) -> list[dict[str, Any]]:
        """Evidence for the ``Prediction``: cached quotes, unverifiable quotes, documents shown whole."""
        return [e.to_dict() for e in (*self.evidence, *self.unverified, *self.in_context)]

    def summary(self) -> dict[str, Any]:
        """Counts for the trace (no document text)."""
        return {
            "searches": len(self.searches),
            "queued": len(self.queue),
            "batches_reviewed": self.batches_reviewed,
            "max_batches": self.max_batches,
            "grounded": list(self.grounded),
            "pruned": list(self.pruned),
            "evidence": len(self.evidence),
            "unverified": len(self.unverified),
            "in_context": len(self.in_context),
            "kept_documents": len(self.kept),
        }

    def _prune_pending(self) -> None:
        for handle in self.pending:
            if handle not in self.grounded:
                self.pruned.append(handle)
            elif self.keep_documents and handle in self.docs:
                self.kept[handle] = self.docs[handle]
            # Grounded or not, the text leaves the review: a grounded document lives on as its quotes
            # (and whole in ``kept`` when the bank keeps documents).
            self.docs.pop(handle, None)
        self.pending = []
