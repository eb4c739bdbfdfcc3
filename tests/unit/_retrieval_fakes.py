"""A bag-of-words fake embedder and a Ray-free index builder for retrieval unit tests."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from medagent.config import ModelConfig
from medagent.retrieval.build import ChunkSink, build_indexes, write_index_manifest
from medagent.retrieval.chunking import chunk_batch
from medagent.retrieval.config import (
    ChunkingConfig,
    CorpusConfig,
    EmbedderConfig,
    IndexConfig,
    IndexJobConfig,
    SourceConfig,
)
from medagent.retrieval.corpus import RawRecord, normalize_batch, record_rows
from medagent.retrieval.layout import IndexLayout, parquet_rows, write_shard

DIM = 32


def fake_encode(texts: Sequence[str]) -> np.ndarray:
    """Sum of per-word random vectors (seeded by the word), normalized: shared words -> nearby vectors."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.lower().split():
            out[i] += np.random.default_rng(zlib.crc32(word.encode())).standard_normal(DIM).astype(np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)


def build_tiny_index(
    root: Path,
    sources: dict[str, list[dict[str, object]]],
    chunking: ChunkingConfig | None = None,
    index: IndexConfig | None = None,
    shard_size: int = 4,
) -> IndexJobConfig:
    """Chunk, fake-embed and index ``sources`` (name -> candidate records) exactly as the pipeline's driver
    does, without Ray; returns the job config (the manifest is written)."""
    cfg = IndexJobConfig(
        corpus=CorpusConfig(
            "tiny",
            [SourceConfig(s, "medrag_files", {}) for s in sources],
            chunking or ChunkingConfig(size=8, overlap=2, min_words=2),
        ),
        embedder=EmbedderConfig(name="fake", model=ModelConfig(name="fake"), dimension=DIM, title_sep=" "),
        index=index or IndexConfig(),
        out_dir=str(root),
        shard_size=shard_size,
    )
    layout = IndexLayout(root)
    seen: set[str] = set()
    stats = {}
    for name, records in sources.items():
        rows = list(record_rows(iter(RawRecord(i, r) for i, r in enumerate(records, 1))))
        normalized = normalize_batch({k: [r[k] for r in rows] for k in rows[0]}, name)
        sink = ChunkSink(layout, name, shard_size, seen)
        sink.add(chunk_batch(normalized, vars(cfg.corpus.chunking)))
        stats[name] = sink.finish()
        for k, block in enumerate(layout.chunk_blocks(name)):
            import pyarrow.parquet as pq

            t = pq.read_table(block).to_pydict()
            vecs = fake_encode([f"{a} {b}" for a, b in zip(t["title"], t["content"], strict=True)])
            write_shard(layout.shard(name, k), t["id"], np.array(t["ordinal"]), vecs)
            assert parquet_rows(layout.shard(name, k)) == len(t["id"])
    sources_entry = build_indexes(cfg, layout, stats)
    write_index_manifest(cfg, layout, sources_entry, {}, None, "test")
    return cfg
