"""Which documents a question's searches returned, under which handle the model saw each, and where they went.

The model reads documents as short handles (``D1``, ``D2``, ...: ``MemoryBank.enqueue``); a trace that kept
only those could not say which sources and documents a run saw. Each search step records, per document the
search returned (the reranker's TopR), its corpus id, source, title, text, first-stage and rerank scores and handle
(``search_records``); the memory snapshot at the end maps every reviewed, quoted and pruned handle back to
its document (``snapshot_fields``). Both are read from the run directory by ``medagent.report.evidence``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from medagent.agent.services import Doc

# The key of a search step's ``result`` that holds its documents (kept whole, never cut: ``ToolStep``).
RETRIEVED = "retrieved_docs"


def _key(doc: Doc) -> tuple[str, str]:
    return doc.source, doc.id


def seen_handles(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """``(source, id) -> handle`` of every document earlier search steps queued."""
    out: dict[tuple[str, str], str] = {}
    for r in records:
        for d in r.get(RETRIEVED) or ():
            if d.get("handle"):
                out.setdefault((d["source"], d["id"]), d["handle"])
    return out


def search_records(
    first_stage: Sequence[Doc],
    ranked: Sequence[Doc],
    new_handles: Sequence[str],
    seen: dict[tuple[str, str], str],
) -> list[dict[str, Any]]:
    """One record per document a search returned, in rank order.

    Args:
        first_stage: The retriever's candidates (TopK per source), with their first-stage scores.
        ranked: What the reranker kept (TopR), with its scores; what was queued for the model.
        new_handles: The handles ``MemoryBank.enqueue(ranked)`` gave the documents it had not seen.
        seen: Handles of the documents earlier searches of this question queued (``seen_handles``).

    Raises:
        ValueError: ``new_handles`` does not match the unseen documents (the memory bank and this record
            disagree: our bug).
    """
    first = {_key(d): d.score for d in first_stage}
    fresh = iter(new_handles)
    known = dict(seen)
    out: list[dict[str, Any]] = []
    for rank, d in enumerate(ranked, 1):
        key = _key(d)
        duplicate = key in known
        if not duplicate:
            known[key] = next(fresh, "")
            if not known[key]:
                raise ValueError(f"memory bank queued fewer documents than the search returned new ({key})")
        out.append(
            {
                "rank": rank,
                "handle": known[key],
                "id": d.id,
                "doc_id": d.doc_id,
                "source": d.source,
                "title": d.title,
                # The text the model could review (already cut to the recipe's length), so a reader of the
                # run can see a kept quote inside its document without the index at hand.
                "text": d.content,
                "first_stage_score": first.get(key),
                "rerank_score": d.score,
                # Queued by an earlier search: not shown again, the model knows it by ``handle`` already.
                "duplicate": duplicate,
            }
        )
    if next(fresh, None) is not None:
        raise ValueError("memory bank queued more documents than the search returned new")
    return out


def snapshot_fields(
    summary: dict[str, Any], judged: Iterable[str], records: Iterable[dict[str, Any]]
) -> dict[str, Any]:
    """The memory snapshot's fields: ``MemoryBank.summary()`` plus ``documents``, each reviewed (judged),
    quoted (grounded) and pruned handle with its corpus id and source."""
    by_handle = {h: {"id": k[1], "source": k[0]} for k, h in seen_handles(records).items()}
    handles = [*judged, *summary.get("grounded", ()), *summary.get("pruned", ())]
    docs = {h: by_handle[h] for h in dict.fromkeys(handles) if h in by_handle}
    return {**summary, "documents": docs}
