"""The text store of one source, on disk: chunks and parents in an Arrow IPC file read with ``pread``,
found by id through a sorted array of 64-bit id hashes.

A retriever replica must not hold PubMed's text in RAM (23.9M snippets). Here the text stays in the page
cache: opening a store locates each record batch's buffers (the footer and batch headers), and a lookup
reads only the bytes of the rows it returns, without mapping the file (``medagent.retrieval.pread`` says
why a map would not do). The id -> row index is two memory-mapped numpy arrays, ``keys`` (blake2b-64 of each id, sorted)
and ``rows`` (the row of each key), 12 bytes per row on disk instead of a Python dict of strings
(~150 bytes per id in RAM). Hash collisions are harmless: every candidate row's id is compared with the
requested one.

Files (``<stem>`` = ``index/<source>.store``):
```
<stem>.arrow      rows 0 .. n_chunks-1: the chunks in vector order (row i = FAISS vector i); then parents
<stem>.keys.npy   uint64, sorted hashes of every row's id
<stem>.rows.npy   uint32, the row of each key
<stem>.meta.json  {"format": 1, "chunks": n_chunks, "parents": n_parents}
```
The IPC file is written uncompressed: a compressed buffer would have to be decoded into RAM to be read.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from medagent.retrieval.pread import ArrowStrings

STORE_COLUMNS = ("id", "doc_id", "parent_id", "title", "content", "source")
SCHEMA = pa.schema(
    [(c, pa.string()) for c in STORE_COLUMNS],
    metadata={"medagent.store": "1"},
)
# Rows per record batch: few enough batch objects for 50M rows (~800) while a lookup's batch ``take``
# still copies only the rows it selects.
BATCH_ROWS = 65_536
SUFFIXES = (".arrow", ".keys.npy", ".rows.npy", ".meta.json")


def id_hashes(ids: Iterable[str]) -> np.ndarray:
    """blake2b-64 of each id as uint64: stable across processes and platforms (Python's ``hash`` is not)."""
    raw = b"".join(hashlib.blake2b(i.encode("utf-8"), digest_size=8).digest() for i in ids)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64, copy=False)


def load_npy_random_access(path: Path) -> np.ndarray:
    """A ``.npy`` file memory-mapped read-only, with read-ahead off (``MADV_RANDOM``).

    For the id index only (``keys``, ``rows``: 12 bytes per row): binary searches touch a few pages per
    lookup, and even when every page has become resident it is 12 B/row. Text and vectors are read with
    ``pread`` instead (``medagent.retrieval.pread``), since mapping them would let RSS grow to their size.
    """
    array = np.load(path, mmap_mode="r")
    raw = getattr(array, "_mmap", None)  # numpy.memmap keeps its mmap here
    if raw is not None and hasattr(mmap, "MADV_RANDOM"):
        raw.madvise(mmap.MADV_RANDOM)
    return array


def store_files(stem: Path) -> list[Path]:
    return [stem.with_name(stem.name + s) for s in SUFFIXES]


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_store(stem: Path, chunks: Iterable[pa.Table], parents: Iterable[pa.Table] = ()) -> int:
    """Write a store from chunk tables (in vector order) then parent tables; returns the chunk rows.

    Every table needs the ``STORE_COLUMNS``; other columns are dropped. Each file is written under a
    temporary name and renamed; a reader checks that all four exist and agree in size.
    """
    arrow, keys_path, rows_path, meta_path = store_files(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    hashes: list[np.ndarray] = []
    counts = {"chunk": 0, "parent": 0}
    pending: list[pa.Table] = []
    with pa.OSFile(str(_tmp(arrow)), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:

        def flush(final: bool) -> None:
            # Re-batch the 1,024-row chunk blocks into BATCH_ROWS-row record batches.
            nonlocal pending
            if not pending:
                return
            table = pa.concat_tables(pending)
            whole = table.num_rows if final else (table.num_rows // BATCH_ROWS) * BATCH_ROWS
            if whole:
                writer.write_table(table.slice(0, whole).combine_chunks(), max_chunksize=BATCH_ROWS)
            pending = [table.slice(whole)] if whole < table.num_rows else []

        for kind, tables in (("chunk", chunks), ("parent", parents)):
            for table in tables:
                missing = [c for c in STORE_COLUMNS if c not in table.column_names]
                if missing:
                    raise ValueError(f"store {stem.name}: {kind} table lacks columns {missing}")
                table = table.select(list(STORE_COLUMNS)).cast(SCHEMA)
                hashes.append(id_hashes(table.column("id").to_pylist()))
                pending.append(table)
                counts[kind] += table.num_rows
                if sum(t.num_rows for t in pending) >= BATCH_ROWS:
                    flush(final=False)
        flush(final=True)
    n = counts["chunk"] + counts["parent"]
    if n >= 2**32:
        raise ValueError(f"store {stem.name}: {n} rows exceed the uint32 row index")
    all_hashes = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    order = np.argsort(all_hashes, kind="stable")
    for path, array in ((keys_path, all_hashes[order]), (rows_path, order.astype(np.uint32))):
        with open(_tmp(path), "wb") as fh:  # a file object: np.save would append ".npy" to the name
            np.save(fh, array, allow_pickle=False)
    _tmp(meta_path).write_text(
        json.dumps({"format": 1, "chunks": counts["chunk"], "parents": counts["parent"]}) + "\n",
        encoding="utf-8",
    )
    for final in (arrow, keys_path, rows_path, meta_path):
        os.replace(_tmp(final), final)
    return counts["chunk"]


@dataclass(frozen=True)
class StoredRow:
    """One row of a store (see ``STORE_COLUMNS``)."""

    id: str
    doc_id: str
    parent_id: str | None
    title: str
    content: str
    source: str


class TextStore:
    """A source's chunks and parents on disk; opening reads the batch layout, lookups read their rows.

    Args:
        stem: ``index/<source>.store`` (see the module docstring).

    Raises:
        FileNotFoundError: A store file is missing (the index predates the on-disk store).
    """

    def __init__(self, stem: Path) -> None:
        missing = [str(p) for p in store_files(stem) if not p.exists()]
        if missing:
            raise FileNotFoundError(f"text store files missing: {missing}")
        arrow, keys_path, rows_path, meta_path = store_files(stem)
        self.path = arrow
        # Text is read with pread, never mapped (medagent.retrieval.pread says why): a lookup copies its rows'
        # bytes and leaves the pages in the page cache, outside the replica's RSS.
        self._text = ArrowStrings(arrow, STORE_COLUMNS)
        self._starts = np.concatenate([[0], np.cumsum(self._text.batch_rows)])
        self.keys: np.ndarray = load_npy_random_access(keys_path)
        self.rows: np.ndarray = load_npy_random_access(rows_path)
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        self.n_rows = int(self._starts[-1])
        self.n_chunks = int(meta["chunks"])
        if len(self.keys) != self.n_rows or len(self.rows) != self.n_rows:
            raise ValueError(f"{stem}: the id index has {len(self.keys)} keys for {self.n_rows} rows")

    def __len__(self) -> int:
        return self.n_rows

    # Rows -> values ------------------------------------------------------------------------------------
    def column(self, name: str, rows: Sequence[int] | np.ndarray) -> list[Any]:
        """Values of one column at ``rows`` (in that order)."""
        return self._columns((name,), rows)[0]

    def read(self, rows: Sequence[int] | np.ndarray) -> list[StoredRow]:
        """Whole rows, in order."""
        values = self._columns(STORE_COLUMNS, rows)
        return [StoredRow(*row) for row in zip(*values, strict=True)]

    def _columns(self, names: Sequence[str], rows: Sequence[int] | np.ndarray) -> list[list[Any]]:
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= self.n_rows):
            raise IndexError(f"{self.path}: row out of range 0..{self.n_rows - 1}")
        out: list[list[Any]] = [[None] * len(rows) for _ in names]
        order = np.argsort(rows, kind="stable")  # each batch's rows ascending: nearby ones are read as a run
        ordered = rows[order]
        batch_of = np.searchsorted(self._starts, ordered, side="right") - 1
        for b in np.unique(batch_of):
            where = np.flatnonzero(batch_of == b)
            local = ordered[where] - self._starts[b]
            targets = order[where].tolist()
            for column, name in zip(out, names, strict=True):
                for i, v in zip(targets, self._text.values(int(b), name, local), strict=True):
                    column[i] = v
        return out

    # Ids -> rows ---------------------------------------------------------------------------------------
    def find(self, ids: Sequence[str]) -> np.ndarray:
        """Row of each id, -1 where the store does not hold it."""
        out = np.full(len(ids), -1, dtype=np.int64)
        if not ids:
            return out
        h = id_hashes(ids)
        lo = np.searchsorted(self.keys, h, side="left")
        hi = np.searchsorted(self.keys, h, side="right")
        # Candidate rows of every id (almost always one; several only on a 64-bit hash collision), their
        # stored ids read in one pass and compared with the requested ones.
        owner = np.repeat(np.arange(len(ids)), hi - lo)
        if not len(owner):
            return out
        spans = [np.asarray(self.rows[a:b], dtype=np.int64) for a, b in zip(lo, hi, strict=True) if b > a]
        candidates = np.concatenate(spans)
        for i, row, stored in zip(
            owner.tolist(), candidates.tolist(), self.column("id", candidates), strict=True
        ):
            if out[i] < 0 and stored == ids[i]:
                out[i] = row
        return out

    def get(self, ids: Sequence[str]) -> list[StoredRow]:
        """The rows of ``ids``, in order.

        Raises:
            KeyError: Some ids are not in the store (all of them are named, up to ten).
        """
        rows = self.find(ids)
        missing = [ids[i] for i in np.flatnonzero(rows < 0)]
        if missing:
            raise KeyError(f"{len(missing)} id(s) not in {self.path}: {missing[:10]}")
        return self.read(rows)


class StoreIds(Sequence[str]):
    """The chunk ids of a store in vector order, read on demand (what FAISS row i and BM25 doc i mean)."""

    def __init__(self, store: TextStore) -> None:
        self.store = store

    def __len__(self) -> int:
        return self.store.n_chunks

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self.take(range(*i.indices(len(self))))
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self.take([i % len(self)])[0]

    def take(self, rows: Iterable[int]) -> list[str]:
        return [str(v) for v in self.store.column("id", np.fromiter(rows, dtype=np.int64))]

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), BATCH_ROWS):
            yield from self.take(range(start, min(len(self), start + BATCH_ROWS)))


def take_ids(ids: Sequence[str], rows: Sequence[int] | np.ndarray) -> list[str]:
    """``[ids[r] for r in rows]``, in one store read when ``ids`` is a ``StoreIds``."""
    if isinstance(ids, StoreIds):
        return ids.take(int(r) for r in rows)
    return [ids[int(r)] for r in rows]
