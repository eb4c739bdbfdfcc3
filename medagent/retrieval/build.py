"""Driver-side steps of the indexing job, kept free of Ray so they are unit-testable.

- ``ChunkSink`` receives the ordered output of the chunk stage for one source and commits it as fixed-size
  chunk blocks (block k = chunks ``[k*S, (k+1)*S)``; shard k embeds block k), parent blocks and rejected
  records; it drops documents whose id was already seen (in any source).
- ``ShardCollector`` receives embedded rows in any order and writes a shard once all its rows arrived.
- ``build_source_index`` turns a source's shards into its FAISS (and BM25) index files; BM25 is built from
  the chunk blocks on disk one block at a time (``medagent.retrieval.bm25``), never the corpus's text at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from medagent.retrieval.bm25 import build_bm25_streaming
from medagent.retrieval.config import IndexConfig, IndexJobConfig
from medagent.retrieval.embedders import embedder_identity
from medagent.retrieval.index import build_dense_index, bytes_per_vector, save_faiss
from medagent.retrieval.layout import (
    MANIFEST_FORMAT,
    IndexLayout,
    read_json,
    write_json_atomic,
    write_parquet_atomic,
    write_shard,
    write_text_atomic,
)
from medagent.retrieval.store import StoreIds, TextStore, store_files, write_store
from medagent.run.manifest import build_manifest, file_checksums

log = logging.getLogger(__name__)

BLOCK_COLUMNS = ("id", "doc_id", "parent_id", "title", "content", "source", "n")


def job_identity(cfg: IndexJobConfig) -> dict[str, Any]:
    """What the chunks and vectors of an index folder depend on (the index kind is not part of it: a
    folder can be re-indexed as flat, IVF-PQ or HNSW from the same shards)."""
    identity: dict[str, Any] = {
        "corpus": asdict(cfg.corpus),
        "embedder": embedder_identity(cfg.embedder),
        "shard_size": cfg.shard_size,
        "limit": cfg.limit,
    }
    if cfg.limit is not None:
        # `limit` used to count records read, now accepted documents: a folder built the old way holds other
        # chunks under the same limit, so it must not pass for this job (full indexes keep their identity).
        identity["limit_counts"] = "accepted documents"
    return identity


def fingerprint(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class SourceChunkStats:
    """Counts of one source after chunking (``chunks/<source>/_SUCCESS.json``)."""

    source: str
    documents: int = 0
    chunks: int = 0
    parents: int = 0
    blocks: int = 0
    rejected: int = 0
    rejected_by_reason: dict[str, int] = field(default_factory=dict)
    data_files: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    # Why an optional source was left out (its files are missing); None for a source that was read.
    missing: str | None = None


class ChunkSink:
    """Commits the chunk stage's ordered rows of one source to fixed-size blocks.

    Args:
        layout: The index folder.
        source: Source label.
        block_size: Chunks per block (= ``shard_size``).
        seen_doc_ids: Document ids already taken (shared across sources, updated here).
        limit: Keep at most this many documents (``IndexJobConfig.limit``: it counts accepted documents,
            not records read); ``full`` turns true at the first row of the document after them, and every
            later row is ignored, so the caller can stop reading.
    """

    def __init__(
        self,
        layout: IndexLayout,
        source: str,
        block_size: int,
        seen_doc_ids: set[str],
        limit: int | None = None,
    ) -> None:
        self.layout, self.source, self.block_size = layout, source, block_size
        self.seen = seen_doc_ids
        self.limit = limit
        self.full = limit is not None and limit <= 0
        self.stats = SourceChunkStats(source)
        self._chunks: list[dict[str, Any]] = []
        self._parents: list[dict[str, Any]] = []
        self._rejected: list[dict[str, Any]] = []
        self._current: str | None = None
        self._dropping: str | None = None
        self._ordinal = 0
        self._parent_blocks = 0
        self._start = time.perf_counter()

    def add(self, batch: dict[str, Any]) -> None:
        """One batch of chunk-stage output (columns ``chunking.CHUNK_COLUMNS``), in stream order."""
        n = len(batch["kind"])
        cols = {k: list(batch[k]) for k in ("kind", "id", "doc_id", "parent_id", "title", "content", "source",
                                             "n", "row", "error", "raw")}  # fmt: skip
        for i in range(n):
            if self.full:
                return
            kind, doc_id = cols["kind"][i], cols["doc_id"][i]
            if kind == "rejected":
                self._reject(cols["error"][i], cols["row"][i], cols["id"][i] or None, cols["raw"][i])
                continue
            if doc_id != self._current:  # first row of the next document (rows of a document are contiguous)
                if self.limit is not None and self.stats.documents >= self.limit:
                    self.full = True
                    return
                self._current = doc_id
                if doc_id in self.seen:
                    self._dropping = doc_id
                    self._reject("duplicate id", cols["row"][i], doc_id, "")
                else:
                    self._dropping = None
                    self.seen.add(doc_id)
                    self.stats.documents += 1
            if self._dropping == doc_id:
                continue
            record = {k: cols[k][i] for k in BLOCK_COLUMNS}
            record["n"] = int(record["n"])
            if kind == "parent":
                self._parents.append(record)
                self.stats.parents += 1
                if len(self._parents) >= self.block_size:
                    self._flush_parents()
            else:
                self._chunks.append(
                    {**record, "ordinal": self._ordinal, "shard": self._ordinal // self.block_size}
                )
                self._ordinal += 1
                if len(self._chunks) >= self.block_size:
                    self._flush_chunks()

    def _reject(self, reason: str, row: Any, doc_id: str | None, raw: str) -> None:
        row_no = int(row) if row is not None and int(row) >= 0 else None
        self._rejected.append(
            {"source": self.source, "reason": reason, "row": row_no, "id": doc_id, "raw": raw}
        )

    def _flush_chunks(self) -> None:
        if self._chunks:
            k = self._chunks[0]["shard"]
            write_parquet_atomic(pa.Table.from_pylist(self._chunks), self.layout.chunk_block(self.source, k))
            self.stats.blocks += 1
            self._chunks = []

    def _flush_parents(self) -> None:
        if self._parents:
            table = pa.Table.from_pylist(self._parents)
            write_parquet_atomic(table, self.layout.parent_block(self.source, self._parent_blocks))
            self._parent_blocks += 1
            self._parents = []

    def finish(self, data_files: Sequence[Path] = ()) -> SourceChunkStats:
        """Write the last partial blocks, the rejected records and the ``_SUCCESS.json`` marker."""
        self._flush_chunks()
        self._flush_parents()
        self.stats.chunks = self._ordinal
        self.stats.rejected = len(self._rejected)
        self.stats.rejected_by_reason = dict(Counter(r["reason"] for r in self._rejected).most_common())
        self.stats.data_files = {str(k): v for k, v in file_checksums(data_files).items()}
        self.stats.seconds = time.perf_counter() - self._start
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self._rejected)
        write_text_atomic(self.layout.source_rejected(self.source), lines)
        write_text_atomic(self.layout.chunks_done(self.source), json.dumps(asdict(self.stats), indent=2))
        return self.stats


class ShardCollector:
    """Buffers embedded rows per ``(source, shard)`` and writes each shard when its last row arrives.

    Args:
        layout: The index folder.
        expected: ``(source, shard) -> rows`` of every shard being embedded.
        precision: The encoder precision (``fp16`` / ``fp32``) of the shards already in the folder, ``None``
            when none was recorded. Rows carrying another precision are refused: one index's vectors must
            come from one precision, and a job started on CPU (fp32) and resumed on a GPU (fp16) would mix
            them under one fingerprint. ``self.precision`` holds it once the first row with one arrives.
    """

    def __init__(
        self, layout: IndexLayout, expected: dict[tuple[str, int], int], precision: str | None = None
    ) -> None:
        self.layout, self.expected = layout, dict(expected)
        self.precision = precision
        self._rows: dict[tuple[str, int], dict[int, tuple[str, np.ndarray]]] = {}
        self.written: list[tuple[str, int]] = []

    def _check_precision(self, batch: dict[str, Any]) -> None:
        found = {str(p) for p in batch.get("precision", [])}
        if len(found) > 1:
            raise ValueError(f"one embedded batch mixes encoder precisions {sorted(found)}")
        if not found:
            return
        (got,) = found
        if self.precision is not None and got != self.precision:
            fix = (
                "resume with embedder.half_on_gpu=false to keep fp32 on the GPU"
                if self.precision == "fp32"
                else "resume where the encoder runs on a GPU (fp16 is GPU only)"
            )
            raise ValueError(
                f"{self.layout.root}: its shards were embedded in {self.precision} and this run's encoder "
                f"runs in {got}; one index cannot mix them: {fix}, or use another out_dir"
            )
        self.precision = got

    def add(self, batch: dict[str, Any]) -> list[tuple[str, int]]:
        """Rows ``id, source, shard, ordinal, embedding`` (and ``precision``, checked before anything is
        written); returns the shards completed by this batch."""
        self._check_precision(batch)
        done: list[tuple[str, int]] = []
        emb = np.asarray(batch["embedding"], dtype=np.float32)
        for i, (doc_id, source, shard, ordinal) in enumerate(
            zip(batch["id"], batch["source"], batch["shard"], batch["ordinal"], strict=True)
        ):
            key = (str(source), int(shard))
            if key not in self.expected:
                raise ValueError(f"embedded row for unexpected shard {key}")
            # Keyed by ordinal: a batch retried after an actor failure cannot duplicate a row.
            self._rows.setdefault(key, {})[int(ordinal)] = (str(doc_id), emb[i])
            if len(self._rows[key]) == self.expected[key]:
                self._write(key)
                done.append(key)
        return done

    def _write(self, key: tuple[str, int]) -> None:
        rows = self._rows.pop(key)
        ordinals = np.array(sorted(rows), dtype=np.int64)
        ids = [rows[o][0] for o in ordinals]
        write_shard(self.layout.shard(*key), ids, ordinals, np.stack([rows[o][1] for o in ordinals]))
        self.written.append(key)

    def missing(self) -> list[tuple[str, int]]:
        return sorted(k for k in self.expected if k not in self.written)


def build_source_index(
    layout: IndexLayout, source: str, cfg: IndexConfig, dim: int, metric: str, n_shards: int
) -> dict[str, Any]:
    """FAISS (+ BM25) index files of one source from its shards; returns its manifest entry."""
    shards = [layout.shard(source, k) for k in range(n_shards)]
    n = sum(pq.ParquetFile(s).metadata.num_rows for s in shards)
    refine = cfg.refine_factor if cfg.kind != "flat" else 0
    layout.index_file(source, "vectors.npy").unlink(missing_ok=True)  # a previous build's, maybe stale
    t = time.perf_counter()
    built = build_dense_index(
        cfg, shards, n, dim, metric, layout.index_file(source, "vectors.npy") if refine else None
    )
    save_faiss(built.index, layout.index_file(source, "faiss"))
    write_parquet_atomic(
        pa.table({"id": pa.array(built.ids, pa.string())}), layout.index_file(source, "ids.parquet")
    )
    timings = {"faiss_s": time.perf_counter() - t, **built.timings}
    t = time.perf_counter()
    stem = layout.store_stem(source)
    write_store(
        stem,
        (pq.read_table(b) for b in layout.chunk_blocks(source)),
        (pq.read_table(b) for b in layout.parent_blocks(source)),
    )
    if list(StoreIds(TextStore(stem))) != built.ids:
        raise ValueError(f"{source}: the text store's chunk ids differ from the vectors' ids")
    timings["store_s"] = time.perf_counter() - t
    entry: dict[str, Any] = {
        "vectors": n,
        "index": {
            "kind": built.kind,
            "params": built.params,
            "refine_factor": refine if built.kind != "flat" else 0,
            "bytes_per_vector": bytes_per_vector(built.index),
        },
    }
    if cfg.bm25:
        t = time.perf_counter()
        docs = build_bm25_streaming(_block_texts(layout, source), layout.index_file(source, "bm25"))
        if docs != n:
            raise ValueError(f"{source}: {docs} chunk texts but {n} vectors")
        timings["bm25_s"] = time.perf_counter() - t
    entry["timings"] = timings
    files = [
        layout.index_file(source, s)
        for s in ("faiss", "ids.parquet", "vectors.npy")
        if layout.index_file(source, s).exists()
    ] + store_files(stem)
    if cfg.bm25:
        files += sorted(p for p in layout.index_file(source, "bm25").iterdir() if p.is_file())
    entry["index_files"] = {layout.rel(Path(p)): h for p, h in file_checksums(files).items()}
    entry["shard_files"] = {layout.rel(Path(p)): h for p, h in file_checksums(shards).items()}
    return entry


def _block_texts(layout: IndexLayout, source: str) -> Iterator[list[str]]:
    """The BM25 text of each chunk (title and content), one chunk block at a time, in vector order."""
    for block in layout.chunk_blocks(source):
        table = pq.read_table(block, columns=["title", "content"])
        yield [
            f"{a} {b}".strip()
            for a, b in zip(*(table.column(c).to_pylist() for c in ("title", "content")), strict=True)
        ]


def build_indexes(
    cfg: IndexJobConfig, layout: IndexLayout, stats: dict[str, SourceChunkStats]
) -> dict[str, Any]:
    """Step 3 of the job: every source's index; returns the manifest's ``sources`` entries."""
    sources: dict[str, Any] = {}
    for source, s in stats.items():
        if s.missing:
            log.warning("index %s: left out, %s", source, s.missing)
            sources[source] = {**asdict(s), "vectors": 0, "index": None, "shard_files": {}, "index_files": {}}
            continue
        if s.chunks == 0:
            log.warning("index %s: no chunks (see rejected.jsonl); the source is left out of search", source)
            sources[source] = {**asdict(s), "vectors": 0, "index": None, "shard_files": {}, "index_files": {}}
            continue
        entry = build_source_index(
            layout, source, cfg.index, cfg.embedder.dimension, cfg.embedder.metric, s.blocks
        )
        if entry["vectors"] != s.chunks:
            raise ValueError(f"{source}: {entry['vectors']} vectors for {s.chunks} chunks")
        sources[source] = {**asdict(s), **entry}
        log.info("index %s: %s over %d vectors (%.1f bytes/vector)", source, entry["index"]["kind"],
                 entry["vectors"], entry["index"]["bytes_per_vector"])  # fmt: skip
    return sources


def files_present(layout: IndexLayout, manifest: dict[str, Any]) -> bool:
    """Every shard and index file the manifest lists still exists (a deleted shard means: resume)."""
    files = [f for s in manifest["sources"].values() for f in (*s["shard_files"], *s["index_files"])]
    return all((layout.root / f).exists() for f in files)


def write_index_manifest(
    cfg: IndexJobConfig,
    layout: IndexLayout,
    sources: dict[str, Any],
    timings: dict[str, Any],
    previous: dict[str, Any] | None,
    fp: str,
) -> dict[str, Any]:
    """Write ``manifest.json`` (last: its presence marks the folder complete) and return it."""
    totals = {k: sum(s[k] for s in sources.values()) for k in ("documents", "chunks", "vectors", "rejected")}
    missing = {name: s["missing"] for name, s in sources.items() if s.get("missing")}
    data_files = [Path(p) for s in sources.values() for p in s["data_files"]]
    # Each invocation's timings also go into ``history``: a resumed job's manifest keeps the earlier runs'.
    manifest = build_manifest(asdict(cfg), data_files, previous, fingerprint=fp, timings=timings)
    manifest.update({"format": MANIFEST_FORMAT, "fingerprint": fp, "complete": True, "sources": sources, "totals": totals,
                     "timings": timings, "missing_sources": missing})  # fmt: skip
    e = cfg.embedder
    # The precision the shards were encoded in (None for a folder started before it was recorded).
    precision = (read_json(layout.job) or {}).get("precision")
    manifest["embedder"] = {"name": e.name, "model": e.model.name, "dimension": e.dimension, "metric": e.metric,
                            "normalize": e.normalize, "precision": precision}  # fmt: skip
    write_json_atomic(layout.manifest, manifest)
    return manifest
