"""The questions table (one row per question, one cell per benchmark run), its pages, and one question in full.

A page is cut on the server, so the browser renders at most ``MAX_PAGE`` rows however large the runs are.
One question's detail reads its trace files (through ``RunDir.trace_path`` and ``confined``) and gathers the
retrieved documents from the trace's search steps and the cited evidence, with each quote's spans located in
the document text as character offsets; the page turns them into ``<mark>`` text nodes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from medagent.view.paths import OutsideRunError, confined
from medagent.view.runs import ViewRun

MAX_PAGE = 200
FLIPS = ("right_to_wrong", "wrong_to_right")
# Keys under which a search step may list its documents (dicts), and where a document keeps its text.
_DOC_LISTS = ("retrieved_docs", "documents", "docs", "retrieved", "provenance", "hits", "passages")
_TEXT_KEYS = ("text", "content", "excerpt", "preview")
_ELLIPSIS = re.compile(r"\.\.\.+|…")


def question_ids(runs: Sequence[ViewRun]) -> list[str]:
    """Every question of the benchmark runs, in the order the runs first wrote them."""
    seen: dict[str, None] = {}
    for vr in runs:
        if vr.kind == "qa" and vr.run is not None:
            seen.update(dict.fromkeys(p.id for p in vr.run.predictions))
            seen.update(dict.fromkeys(vr.run.golds))
    return list(seen)


def _right(vr: ViewRun, qid: str) -> bool | None:
    cell = vr.cells.get(qid)
    if cell is None or cell.status == "answered":
        return None
    return cell.status == "right"


def page(
    runs: Sequence[ViewRun],
    ids: Sequence[str],
    *,
    offset: int = 0,
    limit: int = 50,
    flip: str | None = None,
    a: int | None = None,
    b: int | None = None,
    sort: str = "order",
    search: str = "",
) -> dict[str, Any]:
    """One page of the table: rows ``offset..offset+limit`` after filtering and sorting.

    Args:
        flip: ``right_to_wrong`` or ``wrong_to_right`` from run ``a`` to run ``b`` (indices into ``runs``).
        sort: ``order`` (as written), ``cost`` / ``-cost`` (tokens over every run shown, ascending/descending).
        search: Keep ids containing this text.
    """
    qa = [vr for vr in runs if vr.kind == "qa"]
    if flip is not None:
        if flip not in FLIPS:
            raise ValueError(f"flip must be one of {FLIPS}, got {flip!r}")
        by_index = {vr.index: vr for vr in qa}
        if a not in by_index or b not in by_index:
            raise ValueError("a flip filter needs two benchmark runs a and b")
        want = (True, False) if flip == "right_to_wrong" else (False, True)
        ids = [q for q in ids if (_right(by_index[a], q), _right(by_index[b], q)) == want]  # type: ignore[index]
    if search:
        ids = [q for q in ids if search.lower() in q.lower()]
    if sort in ("cost", "-cost"):
        cost = {q: sum(vr.cells[q].tokens for vr in qa if q in vr.cells) for q in ids}
        ids = sorted(ids, key=lambda q: cost[q], reverse=sort == "-cost")
    elif sort != "order":
        raise ValueError(f"sort must be order, cost or -cost, got {sort!r}")
    limit = max(1, min(limit, MAX_PAGE))
    offset = max(0, offset)
    rows = []
    for qid in ids[offset : offset + limit]:
        cells = {str(vr.index): vr.cells[qid].to_dict() for vr in qa if qid in vr.cells}
        rows.append({"id": qid, "cells": cells, "tokens": sum(c["tokens"] for c in cells.values())})
    return {"total": len(ids), "offset": offset, "limit": limit, "rows": rows}


def _fragments(quote: str) -> list[str]:
    return [p.strip() for p in _ELLIPSIS.split(quote) if p.strip()]


def find_spans(text: str, quote: str) -> list[list[int]]:
    """Character spans of ``quote`` in ``text``: each fragment of an elided quote ("a ... b") in order, matched
    ignoring case and runs of whitespace and punctuation (as the memory bank verifies quotes)."""
    spans: list[list[int]] = []
    pos = 0
    for frag in _fragments(quote):
        words = re.findall(r"\w+", frag)
        if not words:
            continue
        pattern = re.compile(r"\W+".join(map(re.escape, words)), re.IGNORECASE)
        m = pattern.search(text, pos)
        if m is None:
            return []
        spans.append([m.start(), m.end()])
        pos = m.end()
    return spans


def _doc_key(d: dict[str, Any]) -> str:
    return str(d.get("handle") or d.get("doc_id") or d.get("id") or d.get("corpus_id") or "")


def documents(trace: list[dict[str, Any]], evidence: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Retrieved documents (search steps' per-document records, where the trace keeps them) merged with the
    cited evidence; each has its fields as recorded, ``text`` where known, and ``quotes`` with their spans."""
    docs: dict[str, dict[str, Any]] = {}
    for step in trace:
        result = step.get("result") if isinstance(step.get("result"), dict) else {}
        for holder in (step, result):
            for key in _DOC_LISTS:
                listed = holder.get(key) if isinstance(holder, dict) else None
                if not isinstance(listed, list):
                    continue
                for d in listed:
                    if isinstance(d, dict) and _doc_key(d):
                        entry = docs.setdefault(_doc_key(d), {"quotes": [], "steps": []})
                        entry.update({k: v for k, v in d.items() if k not in ("quotes", "steps")})
                        entry["steps"].append(step.get("step"))
    by_doc_id = {
        str(d.get("doc_id") or d.get("id")): k for k, d in docs.items() if d.get("doc_id") or d.get("id")
    }
    for ev in evidence:
        key = _doc_key(ev)
        key = key if key in docs else by_doc_id.get(str(ev.get("doc_id")), key)
        entry = docs.setdefault(key, {"quotes": [], "steps": []})
        for k in ("handle", "doc_id", "source", "title"):
            if ev.get(k) is not None and entry.get(k) is None:
                entry[k] = ev[k]
        if ev.get("kind") == "context" and not entry.get("text"):
            entry["text"] = ev.get("quote", "")  # the whole document as the model saw it
        else:
            entry["quotes"].append({"quote": ev.get("quote", ""), "verified": ev.get("verified")})
    for entry in docs.values():
        text = next((str(entry[k]) for k in _TEXT_KEYS if isinstance(entry.get(k), str) and entry[k]), "")
        entry["text"] = text
        for q in entry["quotes"]:
            q["spans"] = find_spans(text, q["quote"]) if text else []
    return list(docs.values())


def read_trace(vr: ViewRun, qid: str) -> list[dict[str, Any]]:
    """The trace of ``qid`` in ``vr`` (empty when none was written); the path stays inside the run."""
    rd = vr.rundir
    try:
        path = confined(rd.root, str(rd.trace_path(qid).relative_to(rd.root)))
    except OutsideRunError:
        return []
    trace = json.loads(path.read_text(encoding="utf-8")).get("trace") or []
    return [s for s in trace if isinstance(s, dict)]


def detail(runs: Sequence[ViewRun], qid: str) -> dict[str, Any]:
    """The question (from the first run that kept it), its gold, and every benchmark run's answer, trace and
    documents."""
    qa = [vr for vr in runs if vr.kind == "qa" and vr.run is not None]
    question = next((vr.questions[qid] for vr in qa if qid in vr.questions), None)
    gold = next((vr.run.golds[qid] for vr in qa if vr.run is not None and qid in vr.run.golds), None)
    answers = []
    for vr in qa:
        assert vr.run is not None
        pred = next((p for p in vr.run.predictions if p.id == qid), None)
        if pred is None:
            answers.append({"run": vr.index, "label": vr.label, "missing": True})
            continue
        trace = read_trace(vr, qid)
        answers.append(
            {
                "run": vr.index,
                "label": vr.label,
                "answer": pred.answer,
                "status": vr.cells[qid].status,
                "raw": pred.raw,
                "error": pred.error,
                "usage": pred.usage,
                "latency_s": pred.latency_s,
                "trace": trace,
                "evidence": pred.evidence,
                "documents": documents(trace, pred.evidence),
            }
        )
    return {
        "id": qid,
        "question": question.to_dict() if question else None,
        "gold": gold.to_dict() if gold else None,
        "answers": answers,
    }
