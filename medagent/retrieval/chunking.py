"""Chunking with stable ids: plain windows, or the history-taking paper's parent–child split.

Sizes count whitespace-separated words (after ``clean_text`` collapsed the whitespace), not model tokens:
chunk ids, chunk texts and the BM25 index then stay the same whichever embedder is used. Keep ``size``
below the embedder's token limit (about 0.7 words per token for biomedical English with WordPiece).

Ids: a plain chunk is ``{doc_id}#{n}``; in ``parent_child`` mode a parent is ``{doc_id}#{p}`` and its
children are ``{doc_id}#{p}.{c}``. Numbers count from 0 in text order, so the same document and the same
configuration always give the same ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from medagent.retrieval.config import ChunkingConfig
from medagent.retrieval.corpus import Document, require_columns

MODES = ("plain", "parent_child")


@dataclass(frozen=True)
class Chunk:
    """A piece of text that is indexed (``kind="chunk"``) or returned as a parent (``kind="parent"``).

    Attributes:
        id: Stable id (see the module docstring).
        doc_id: The document it was cut from.
        parent_id: For an indexed chunk, the unit returned by parent search: its document (plain mode) or
            its parent chunk (``parent_child``). For a parent, the document's own ``parent_id``
            (plain mode) or the document id (``parent_child``).
        title: The document's title.
        content: The chunk's words joined by single spaces.
        source: Source label.
        n: Position among its siblings (-1 for a whole document kept as a parent).
    """

    id: str
    doc_id: str
    parent_id: str | None
    title: str
    content: str
    source: str
    n: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def validate_chunking(cfg: ChunkingConfig) -> None:
    """Raises ValueError for sizes that cannot make progress or a parent smaller than its children."""
    if cfg.mode not in MODES:
        raise ValueError(f"chunking.mode must be one of {MODES}, got {cfg.mode!r}")
    if cfg.size < 1 or not 0 <= cfg.overlap < cfg.size:
        raise ValueError(
            f"chunking needs size >= 1 and 0 <= overlap < size (size={cfg.size}, overlap={cfg.overlap})"
        )
    if cfg.min_words < 0:
        raise ValueError(f"chunking.min_words must be >= 0, got {cfg.min_words}")
    if cfg.mode == "parent_child" and (
        cfg.parent_size <= cfg.size or not 0 <= cfg.parent_overlap < cfg.parent_size
    ):
        raise ValueError(
            "parent_child chunking needs parent_size > size and 0 <= parent_overlap < parent_size "
            f"(parent_size={cfg.parent_size}, size={cfg.size}, parent_overlap={cfg.parent_overlap})"
        )


def windows(n_words: int, size: int, overlap: int, min_words: int = 0) -> list[tuple[int, int]]:
    """Word spans ``[start, end)`` of ``size`` words advancing by ``size - overlap``.

    A last window that adds fewer than ``min_words`` new words is merged into the previous one, so no
    chunk is a short leftover of its neighbour.
    """
    if n_words <= size:
        return [(0, n_words)]
    stride = size - overlap
    spans: list[tuple[int, int]] = []
    start = 0
    while True:
        end = min(start + size, n_words)
        spans.append((start, end))
        if end >= n_words:
            break
        start += stride
    if len(spans) > 1 and spans[-1][1] - spans[-2][1] < min_words:
        spans[-2:] = [(spans[-2][0], n_words)]
    return spans


def chunk_document(doc: Document, cfg: ChunkingConfig) -> tuple[list[Chunk], list[Chunk]]:
    """Cut one document; returns ``(parents, chunks)`` in text order (chunks are what gets indexed)."""
    words = doc.content.split(" ")
    if cfg.mode == "plain":
        parent = Chunk(doc.id, doc.id, doc.parent_id, doc.title, doc.content, doc.source, -1)
        chunks = [
            Chunk(f"{doc.id}#{n}", doc.id, doc.id, doc.title, " ".join(words[s:e]), doc.source, n)
            for n, (s, e) in enumerate(windows(len(words), cfg.size, cfg.overlap, cfg.min_words))
        ]
        return [parent], chunks
    parents: list[Chunk] = []
    children: list[Chunk] = []
    for p, (ps, pe) in enumerate(windows(len(words), cfg.parent_size, cfg.parent_overlap, cfg.min_words)):
        pid = f"{doc.id}#{p}"
        pwords = words[ps:pe]
        parents.append(Chunk(pid, doc.id, doc.id, doc.title, " ".join(pwords), doc.source, p))
        for c, (s, e) in enumerate(windows(len(pwords), cfg.size, cfg.overlap, cfg.min_words)):
            children.append(Chunk(f"{pid}.{c}", doc.id, pid, doc.title, " ".join(pwords[s:e]), doc.source, c))
    return parents, children


def chunk_documents(docs: Iterable[Document], cfg: ChunkingConfig) -> Iterator[Chunk]:
    """The indexed chunks of ``docs``, in order (no Ray; used by benchmarks and tests)."""
    validate_chunking(cfg)
    for doc in docs:
        yield from chunk_document(doc, cfg)[1]


# Ray Data stage -------------------------------------------------------------------------------------------
CHUNK_INPUT_KEYS = ("id", "title", "content", "source", "parent_id", "row", "error", "raw")
CHUNK_COLUMNS = (
    "kind",
    "id",
    "doc_id",
    "parent_id",
    "title",
    "content",
    "source",
    "n",
    "row",
    "error",
    "raw",
)


def chunk_batch(batch: dict[str, Any], chunking: dict[str, Any]) -> dict[str, list[Any]]:
    """``map_batches`` stage after ``normalize_batch``: each document becomes its parent row(s) followed
    by its chunk rows (``kind`` = ``parent`` / ``chunk``); a rejected record passes through as one
    ``kind="rejected"`` row. Rows of one document stay contiguous and in order."""
    require_columns(batch, CHUNK_INPUT_KEYS, "chunk")
    cfg = ChunkingConfig(**chunking)
    validate_chunking(cfg)
    out: dict[str, list[Any]] = {k: [] for k in CHUNK_COLUMNS}

    def emit(kind: str, c: Chunk, row: Any) -> None:
        values = (kind, c.id, c.doc_id, c.parent_id, c.title, c.content, c.source, c.n, row, "", "")
        for key, value in zip(CHUNK_COLUMNS, values, strict=True):
            out[key].append(value)

    cols = [batch[k] for k in CHUNK_INPUT_KEYS]
    for doc_id, title, content, source, parent_id, row, error, raw in zip(*cols, strict=True):
        if error:
            values = ("rejected", doc_id, doc_id, None, "", "", source, -1, row, error, raw)
            for key, value in zip(CHUNK_COLUMNS, values, strict=True):
                out[key].append(value)
            continue
        parents, chunks = chunk_document(Document(doc_id, title, content, source, parent_id or None), cfg)
        for p in parents:
            emit("parent", p, row)
        for c in chunks:
            emit("chunk", c, row)
    return out
