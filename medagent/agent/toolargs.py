"""Reading tool arguments and tool-call replies in the shapes small models actually write.

Each helper accepts the documented shape and its common variants (ids as ``"D1, D3"`` or ``[1, 3]``,
verdicts as ``"yes"``, a ``{id: verdict}`` mapping instead of a list) and raises ``ToolError`` only where
the model must be told to try again.
"""

from __future__ import annotations

import re
from typing import Any


class ToolError(Exception):
    """The model's call cannot run as written; the message is shown to the model."""


def text_arg(args: dict[str, Any], key: str, default: str | None = None) -> str:
    value = args.get(key)
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"argument {key!r} must be a non-empty string")
    return value.strip()


def options_arg(value: Any) -> dict[str, str] | None:
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()} or None
    if isinstance(value, list):
        return {str(i): str(v) for i, v in enumerate(value, 1)} or None
    return None


def doc_handles(value: Any) -> list[str]:
    """``["D1", "d3"]``, ``"D1, D3"``, ``[1, 3]`` -> ``["D1", "D3"]`` (small models vary the shape)."""
    if isinstance(value, (str, int)):
        value = re.findall(r"[A-Za-z]*\d+", str(value))
    if not isinstance(value, list):
        return []
    out: list[str] = []
    for item in value:
        m = re.fullmatch(r"\s*\[?\s*(?:[Dd](?:oc)?\s*)?(\d+)\s*\]?\s*", str(item))
        if m and f"D{int(m.group(1))}" not in out:
            out.append(f"D{int(m.group(1))}")
    return out


def judgements(value: Any, batch: list[str]) -> dict[str, tuple[bool | None, str]]:
    """Verdicts by handle, from a list of ``{id, relevant, reason}`` or a ``{id: verdict}`` mapping."""
    if isinstance(value, dict) and not any(k in value for k in ("judgements", "documents", "results")):
        value = [{"id": k, "relevant": v} for k, v in value.items()]
    elif isinstance(value, dict):
        value = next(value[k] for k in ("judgements", "documents", "results") if k in value)
    out: dict[str, tuple[bool | None, str]] = {}
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        ids = doc_handles(item.get("id", item.get("doc_id")))
        verdict = item.get("relevant", item.get("relevance"))
        if isinstance(verdict, str):
            low = verdict.strip().lower()
            verdict = True if low in ("yes", "true", "relevant") else False if low else None
        relevant = verdict if isinstance(verdict, bool) else None
        if ids and ids[0] in batch:
            out[ids[0]] = (relevant, str(item.get("reason", ""))[:300])
    return out


def quotes(value: Any, allowed: list[str]) -> list[tuple[str, str]]:
    """``(handle, quote)`` pairs from ``{"evidence": [{id, quote}]}`` and close variants."""
    if isinstance(value, dict):
        value = value.get("evidence", value.get("quotes", []))
    out: list[tuple[str, str]] = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        ids = doc_handles(item.get("id", item.get("doc_id")))
        quotes = item.get("quote", item.get("quotes", item.get("text")))
        for quote in quotes if isinstance(quotes, list) else [quotes]:
            if ids and ids[0] in allowed and isinstance(quote, str) and quote.strip():
                out.append((ids[0], quote.strip()))
    return out
