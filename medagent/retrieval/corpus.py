"""Corpus records: the document contract, opening a configured source, and one shared normalizer.

A reader only knows its source format. It reshapes each source record into a candidate document
``{id, title, content, parent_id}`` and yields it as a ``RawRecord`` (or a ``RawRecord`` carrying the
reason it could not be read). ``normalize_record`` checks every candidate the same way, so a malformed
record is set aside with a stable reason instead of crashing a run or vanishing silently.

A reader is ``def reader(ctx: ReadContext, **options) -> Iterator[RawRecord]``. It checks its options and
resolves its files through ``ctx.file`` / ``ctx.glob`` (recorded for the manifest's checksums) *before*
returning a lazy iterator. A reader of large files may also declare ``ctx.bulk`` so that the pipeline reads
them with Ray Data in parallel instead of through the iterator (the records are the same).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from medagent.data import resolve_data_root
from medagent.retrieval import jats, medrag, readers  # noqa: F401  (the built-in readers register here)
from medagent.retrieval.config import SourceConfig
from medagent.retrieval.reading import READERS, BulkSpec, RawRecord, ReadContext, Reader, register_reader

__all__ = ["READERS", "BulkSpec", "RawRecord", "ReadContext", "Reader", "register_reader"]

# Control characters other than tab/newline break tokenizers and JSON consumers downstream.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPACE = re.compile(r"\s+")
RAW_CHARS = 500  # how much of a rejected record is kept for auditing


@dataclass(frozen=True)
class Document:
    """One retrievable document before chunking.

    Attributes:
        id: Stable id, unique across the whole corpus (local sources prefix the source: ``medquad:...``).
        title: Title, or a pseudo-title (PubMedQA: the question); may be empty.
        content: Normalized text (whitespace collapsed, control characters removed).
        source: Source label (``SourceConfig.name``).
        parent_id: The larger record this document belongs to (``pubmed:<pmid>`` for an abstract or a
            snippet, the MedQuAD focus document for a QA pair), or ``None``.
    """

    id: str
    title: str
    content: str
    source: str
    parent_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RejectedRecord:
    """A source record refused by the normalizer or the reader, with the reason."""

    source: str
    reason: str
    row: int | None = None
    id: str | None = None
    raw: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_readers() -> list[str]:
    return READERS.names()


@dataclass
class OpenedSource:
    """A source ready to read: its records (lazy), the files it reads, and an optional bulk path."""

    name: str
    records: Iterator[RawRecord]
    files: list[Path]
    bulk: BulkSpec | None


def open_source(
    cfg: SourceConfig, data_root: str | Path | None = None, limit: int | None = None
) -> OpenedSource:
    """Open one configured source; options and files are checked now, records are read lazily.

    Args:
        cfg: The source's name, reader and reader options.
        data_root: Folder for relative paths; found with ``resolve_data_root`` when ``None``. Hub readers
            work without one.
        limit: Stop once this many records were *accepted* by ``normalize_record`` (rejected ones pass
            through and are counted, but do not use up the limit: a trial index of MedQuAD must hold
            answers even though its first subsets ship none).

    Raises:
        KeyError: Unknown reader (the message lists the registered ones).
        FileNotFoundError: A file the reader needs is missing.
    """
    reader = READERS.get(cfg.reader)  # KeyError listing the registered readers
    try:
        root: Path | None = resolve_data_root(data_root)
    except FileNotFoundError:
        if data_root is not None:
            raise
        root = None  # hub readers need no local files; local readers fail when they resolve a path
    ctx = ReadContext(data_root=root, source=cfg.name)
    records = reader(ctx, **dict(cfg.options))
    if limit is not None:
        records = accepted_first(records, cfg.name, limit)
    return OpenedSource(cfg.name, records, list(ctx.files), ctx.bulk)


def accepted_first(records: Iterator[RawRecord], source: str, limit: int) -> Iterator[RawRecord]:
    """``records`` up to and including the ``limit``-th one that ``normalize_record`` accepts."""
    accepted = 0
    if limit <= 0:
        return
    for rec in records:
        yield rec
        if isinstance(normalize_record(source, rec), Document):
            accepted += 1
            if accepted >= limit:
                return


def clean_text(value: str) -> str:
    """NFC-normalize, drop control characters and collapse whitespace (chunking counts words)."""
    return _SPACE.sub(" ", _CONTROL.sub(" ", unicodedata.normalize("NFC", value))).strip()


def _raw_repr(data: Any) -> str:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    return text[:RAW_CHARS]


def normalize_record(source: str, raw: RawRecord) -> Document | RejectedRecord:
    """Check one candidate and return the normalized ``Document`` or the reason it was refused.

    Reasons are stable strings: ``not an object``, ``missing id``, ``wrong type: <field> is <type>``,
    ``empty content``, or the reader's own error (``invalid JSON (...)``, ``XML parse error ...``).
    """

    def reject(reason: str, doc_id: str | None = None) -> RejectedRecord:
        return RejectedRecord(source, reason, raw.row, doc_id, _raw_repr(raw.data))

    if raw.error is not None:
        return reject(raw.error)
    data = raw.data
    if not isinstance(data, dict):
        return reject("not an object")
    doc_id = data.get("id")
    if isinstance(doc_id, bool) or not isinstance(doc_id, str | int) or str(doc_id).strip() == "":
        return reject("missing id" if doc_id in (None, "") else f"wrong type: id is {type(doc_id).__name__}")
    doc_id = str(doc_id).strip()
    content = data.get("content", data.get("contents"))
    for name, value in (
        ("content", content),
        ("title", data.get("title")),
        ("parent_id", data.get("parent_id")),
    ):
        if value is not None and not isinstance(value, str):
            return reject(f"wrong type: {name} is {type(value).__name__}", doc_id)
    text = clean_text(content or "")
    if not text:
        return reject("empty content", doc_id)
    parent = data.get("parent_id")
    return Document(
        doc_id, clean_text(data.get("title") or ""), text, source, parent.strip() if parent else None
    )


# Ray Data stage -------------------------------------------------------------------------------------------
NORMALIZE_INPUT_KEYS = ("record",)
NORMALIZED_COLUMNS = ("id", "title", "content", "source", "parent_id", "row", "error", "raw")


def require_columns(batch: dict[str, Any], keys: tuple[str, ...], stage: str) -> None:
    """Names the stage and the missing column instead of failing with a bare KeyError."""
    missing = [k for k in keys if k not in batch]
    if missing:
        raise ValueError(f"{stage}: input batch lacks required column(s) {missing}; has {sorted(batch)}")


def normalize_batch(batch: dict[str, Any], source: str) -> dict[str, list[Any]]:
    """``map_batches`` stage: ``record`` (JSON text of a candidate; optional ``row``, ``error``) -> one row
    per record with the ``Document`` fields, or ``error`` + ``raw`` for a rejected record."""
    require_columns(batch, NORMALIZE_INPUT_KEYS, "normalize")
    n = len(batch["record"])
    rows = list(batch["row"]) if "row" in batch else [None] * n
    errors = list(batch["error"]) if "error" in batch else [""] * n
    out: dict[str, list[Any]] = {k: [] for k in NORMALIZED_COLUMNS}
    for text, row, err in zip(batch["record"], rows, errors, strict=True):
        row_no = int(row) if row is not None and int(row) >= 0 else None
        if err:
            raw = RawRecord(row_no, text, str(err))
        else:
            try:
                raw = RawRecord(row_no, json.loads(text))
            except (TypeError, ValueError) as exc:
                raw = RawRecord(row_no, text, f"invalid JSON ({exc.__class__.__name__})")
        result = normalize_record(source, raw)
        row_col = -1 if row_no is None else row_no  # Arrow-friendly: no nulls in an int column
        if isinstance(result, Document):
            values = (*asdict(result).values(), row_col, "", "")
        else:
            values = (result.id or "", "", "", source, None, row_col, result.reason, result.raw)
        for key, value in zip(NORMALIZED_COLUMNS, values, strict=True):
            out[key].append(value)
    return out


def record_rows(records: Iterator[RawRecord]) -> Iterator[dict[str, Any]]:
    """Rows for ``ray.data.from_items``: each candidate as JSON text, so records of mixed types never
    meet Arrow's column typing before the normalizer has looked at them."""
    for rec in records:
        text = rec.data if rec.error else json.dumps(rec.data, ensure_ascii=False, default=str)
        yield {"row": -1 if rec.row is None else rec.row, "record": str(text), "error": rec.error or ""}


def columns_to_records(batch: dict[str, Any]) -> dict[str, list[Any]]:
    """``map_batches`` stage for typed inputs (parquet, hub): each row as a JSON ``record``."""
    keys = list(batch)
    n = len(batch[keys[0]]) if keys else 0
    cols = {k: list(batch[k]) for k in keys}
    records = [json.dumps({k: cols[k][i] for k in keys}, ensure_ascii=False, default=str) for i in range(n)]
    return {"row": [-1] * n, "record": records, "error": [""] * n}
