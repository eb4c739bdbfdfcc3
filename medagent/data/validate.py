"""One validator for every benchmark: normalized candidate rows in, ``(Question, Gold)`` or ``Rejected`` out.

Loaders only reshape their source format into the normalized schema::

    {"id", "question", "options": {"A": ...}, "answer": "A",
     optional "answer_text", "explanation", "metadata"}

and every check lives here, so all benchmarks refuse bad rows for the same, stable reasons.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from medagent.types import Gold, Question, Rejected

RAW_LIMIT = 500  # characters of a rejected row's repr kept for auditing
_OPTION_KEY = re.compile(r"[A-Z]")


@dataclass(frozen=True)
class RawRow:
    """A loader's candidate row before validation.

    Attributes:
        row: 1-based position of the record in the loader's stream (the line number for JSONL files).
        data: The normalized candidate dict, or whatever the source held when it could not be parsed.
        error: A rejection reason found by the loader itself (``not UTF-8``, ``invalid JSON``); the
            validator passes it through instead of checking ``data``.
    """

    row: int
    data: Any
    error: str | None = None


def _reason(code: str, detail: str = "") -> str:
    # The code stays a stable prefix so callers can match with ``startswith``; detail is for humans.
    return f"{code} ({detail})" if detail else code


def _raw_repr(raw: Any) -> str:
    text = repr(raw)
    return text if len(text) <= RAW_LIMIT else text[: RAW_LIMIT - 3] + "..."


def _check(raw: dict[str, Any]) -> str | None:
    """Return the first rejection reason for a dict row, or ``None`` when it is valid."""
    for name in ("id", "question", "options", "answer"):
        if name not in raw or raw[name] is None:
            return _reason(f"missing field: {name}")
    rid = raw["id"]
    # bool is an int subclass; an id of True is a bug upstream, not an id.
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or str(rid).strip() == "":
        return _reason("wrong type: id", type(rid).__name__)
    if not isinstance(raw["question"], str):
        return _reason("wrong type: question", type(raw["question"]).__name__)
    if not raw["question"].strip():
        return "empty question"
    options = raw["options"]
    if not isinstance(options, dict):
        return _reason("wrong type: options", type(options).__name__)
    if len(options) < 2:
        return _reason("missing options", f"{len(options)} option(s)")
    for key, value in options.items():
        if not isinstance(key, str) or not _OPTION_KEY.fullmatch(key):
            return _reason("wrong type: options", f"key {key!r} is not a single uppercase letter")
        if not isinstance(value, str) or not value.strip():
            return _reason("wrong type: options", f"option {key} must be a non-empty string")
    if not isinstance(raw["answer"], str):
        return _reason("wrong type: answer", type(raw["answer"]).__name__)
    if raw["answer"] not in options:
        return _reason("answer not among options", f"{raw['answer']!r} not in {''.join(options)}")
    for name, types in (("answer_text", (str,)), ("explanation", (str,)), ("metadata", (dict,))):
        value = raw.get(name)
        if value is not None and not isinstance(value, types):
            return _reason(f"wrong type: {name}", type(value).__name__)
    return None


def validate_row(benchmark: str, row_no: int, raw: Any) -> tuple[Question, Gold] | Rejected:
    """Validate one normalized candidate row.

    Args:
        benchmark: Benchmark name given to the ``Question``/``Rejected``.
        row_no: 1-based row number, reported on rejection.
        raw: The candidate row (expected to be a dict in the normalized schema).

    Returns:
        ``(Question, Gold)`` for a valid row, else a ``Rejected`` whose ``reason`` starts with one of the
        stable codes (``not an object``, ``missing field: X``, ``wrong type: X``, ``empty question``,
        ``missing options``, ``answer not among options``).
    """
    if not isinstance(raw, dict):
        return Rejected(benchmark, row_no, _reason("not an object", type(raw).__name__), None, _raw_repr(raw))
    reason = _check(raw)
    rid = raw.get("id")
    if reason is not None:
        id_ = str(rid) if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None
        return Rejected(benchmark, row_no, reason, id_, _raw_repr(raw))
    options: dict[str, str] = {k: v.strip() for k, v in raw["options"].items()}
    answer: str = raw["answer"]
    question = Question(
        id=str(rid),
        text=raw["question"].strip(),
        options=options,
        benchmark=benchmark,
        metadata=dict(raw.get("metadata") or {}),
    )
    gold = Gold(
        id=str(rid),
        answer=answer,
        answer_text=(raw.get("answer_text") or options[answer]).strip(),
        explanation=raw.get("explanation"),
    )
    return question, gold


def validate_rows(benchmark: str, rows: Iterable[RawRow]) -> Iterator[tuple[Question, Gold] | Rejected]:
    """Validate a benchmark's rows in order, rejecting repeated ids.

    The first valid occurrence of an id wins; later valid rows with the same id are rejected as
    ``duplicate id`` (an invalid first occurrence does not reserve the id).

    Args:
        benchmark: Benchmark name.
        rows: The loader's rows, in file order.

    Yields:
        ``(Question, Gold)`` or ``Rejected``, one per input row.
    """
    seen: dict[str, int] = {}
    for raw in rows:
        if raw.error is not None:
            yield Rejected(benchmark, raw.row, raw.error, None, _raw_repr(raw.data))  # unparsed: no id
            continue
        result = validate_row(benchmark, raw.row, raw.data)
        if isinstance(result, tuple):
            qid = result[0].id
            if qid in seen:
                reason = _reason("duplicate id", f"first at row {seen[qid]}")
                yield Rejected(benchmark, raw.row, reason, qid, _raw_repr(raw.data))
                continue
            seen[qid] = raw.row
        yield result
