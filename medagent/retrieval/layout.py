"""The index folder: the only place that knows its file names, plus atomic parquet writes.

```
out_dir/
  job.json                              what the folder was built from (guards against mixing jobs)
  chunks/<source>/block-00000.parquet   chunk k*S .. (k+1)*S-1 of the source (S = shard_size)
  chunks/<source>/_SUCCESS.json         chunking finished: counts, rejections, data checksums
  chunks/<source>/_rejected.jsonl       records set aside while reading this source
  parents/<source>/block-00000.parquet  units returned by parent search (documents or parent chunks)
  embeddings/<source>/shard-00000.parquet   vectors of chunk block k (written atomically)
  index/<source>.faiss | .ids.parquet | .vectors.npy | .bm25/
  index/<source>.store.arrow | .store.keys.npy | .store.rows.npy | .store.meta.json
                                        the text store the retriever reads with pread (store.py)
  rejected.jsonl                        all sources' rejected records
  manifest.json                         written last: the index is complete when it exists
```
A shard file exists only once complete (written to a temporary name, then renamed), so a rerun treats
every existing shard with the expected row count as done.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

# 2: each source has an on-disk text store (``medagent.retrieval.store``); format-1 folders are re-indexed
# by ``index_corpus`` (chunks and vectors kept) and refused by ``Searcher`` with that instruction.
MANIFEST_FORMAT = 2
_SAFE = re.compile(r"^[A-Za-z0-9_.-]+$")


def check_source_name(name: str) -> str:
    if not _SAFE.match(name):
        raise ValueError(f"source name {name!r} must match {_SAFE.pattern} (it names files)")
    return name


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished folder into place (an older one is removed first; folders cannot be swapped
    atomically, but the manifest that points at them is written only afterwards)."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


class IndexLayout:
    """Paths of one index folder (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    @property
    def job(self) -> Path:
        return self.root / "job.json"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def rejected(self) -> Path:
        return self.root / "rejected.jsonl"

    def chunk_dir(self, source: str) -> Path:
        return self.root / "chunks" / check_source_name(source)

    def chunk_block(self, source: str, k: int) -> Path:
        return self.chunk_dir(source) / f"block-{k:05d}.parquet"

    def chunk_blocks(self, source: str) -> list[Path]:
        return sorted(self.chunk_dir(source).glob("block-*.parquet"))

    def chunks_done(self, source: str) -> Path:
        return self.chunk_dir(source) / "_SUCCESS.json"

    def source_rejected(self, source: str) -> Path:
        return self.chunk_dir(source) / "_rejected.jsonl"

    def parent_block(self, source: str, k: int) -> Path:
        return self.root / "parents" / check_source_name(source) / f"block-{k:05d}.parquet"

    def parent_blocks(self, source: str) -> list[Path]:
        return sorted((self.root / "parents" / check_source_name(source)).glob("block-*.parquet"))

    def shard(self, source: str, k: int) -> Path:
        return self.root / "embeddings" / check_source_name(source) / f"shard-{k:05d}.parquet"

    def index_file(self, source: str, suffix: str) -> Path:
        """``suffix``: ``faiss``, ``ids.parquet``, ``vectors.npy`` or ``bm25`` (a folder)."""
        return self.root / "index" / f"{check_source_name(source)}.{suffix}"

    def store_stem(self, source: str) -> Path:
        """Prefix of the source's text store files (``medagent.retrieval.store``)."""
        return self.root / "index" / f"{check_source_name(source)}.store"

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.root))


# Embedding shards ------------------------------------------------------------------------------------------
def write_shard(path: Path, ids: list[str], ordinals: np.ndarray, vectors: np.ndarray) -> None:
    """One shard: ``id``, ``ordinal`` (position in the source) and ``embedding`` (fixed-size float32)."""
    dim = vectors.shape[1]
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
    table = pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "ordinal": pa.array(ordinals, pa.int64()),
            "embedding": pa.FixedSizeListArray.from_arrays(flat, dim),
        }
    )
    write_parquet_atomic(table, path)


def read_shard(path: Path) -> tuple[list[str], np.ndarray]:
    """``(ids, vectors)`` of one shard, in ordinal order."""
    table = pq.read_table(path)
    col = table.column("embedding").combine_chunks()
    dim = col.type.list_size
    vectors = col.values.to_numpy(zero_copy_only=False).reshape(-1, dim).astype(np.float32, copy=False)
    return table.column("id").to_pylist(), vectors


def parquet_rows(path: Path) -> int:
    return int(pq.ParquetFile(path).metadata.num_rows)
