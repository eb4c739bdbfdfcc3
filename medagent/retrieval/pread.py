"""Positional reads (``pread``) of the files a retriever replica looks rows up in, instead of memory maps.

Why not a memory map: on Linux with large page-cache folios (6.x kernels, ext4), one touched row of a mapped
file maps the whole folio around it (~270 KB measured) into the process. A replica's RSS then climbs
towards the size of its text and vector files as lookups scatter over them (``bench_retrieval_scale``, 2M
chunks: 745 B/chunk of file-backed RSS after 400 calls, with ``MADV_RANDOM``). ``os.pread`` copies only the
bytes asked for; the pages stay in the kernel's page cache, shared and reclaimable, and are not the
process's RSS. It is also thread-safe: there is no shared file position.

Two readers:
- ``ArrowStrings``: string columns of an uncompressed Arrow IPC file, located once (buffer offsets per record
  batch) and then read value by value. Nearby rows are read as one run: one read of their offsets, one of
  their bytes.
- ``NpyRows``: rows of a 2-D ``.npy`` file (the refine step's full vectors).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

# Rows at most this far apart in one record batch are read as one run (their bytes in between included).
RUN_GAP = 8


class PositionalFile:
    """A read-only file read at explicit offsets; never mapped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        self._lock = None if hasattr(os, "pread") else threading.Lock()  # Windows: seek + read, serialised

    def read(self, offset: int, size: int) -> bytes:
        """Exactly ``size`` bytes at ``offset``.

        Raises:
            OSError: The file is shorter than that (truncated since it was opened).
        """
        if size <= 0:
            return b""
        if self._lock is None:
            data = os.pread(self._fd, size, offset)
        else:  # pragma: no cover - platforms without pread
            with self._lock:
                os.lseek(self._fd, offset, os.SEEK_SET)
                data = os.read(self._fd, size)
        if len(data) != size:
            raise OSError(f"{self.path}: short read at {offset} ({len(data)} of {size} bytes): truncated?")
        return data

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()


class ArrowStrings:
    """The string columns of an uncompressed Arrow IPC file, read with ``pread``.

    Opening maps the file once to find each record batch's buffers (zero-copy: only the footer and the batch
    headers are touched), keeps their file offsets (32 bytes per batch and column) and unmaps it.

    Args:
        path: The ``.arrow`` file.
        columns: The column names to locate (all must be ``string``).

    Raises:
        ValueError: A column is missing, is not ``string`` or is compressed.
    """

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path = path
        self.columns = {name: j for j, name in enumerate(columns)}
        mapped = _map(path)
        self.batch_rows, self.layout = _locate(mapped, path, columns)
        self._spans = self.layout.tolist()  # plain ints for the read path
        mapped.close()  # a BufferError here would mean that an Arrow buffer still points into the map
        self.file = PositionalFile(path)

    def values(self, batch: int, column: str, local: Sequence[int] | np.ndarray) -> list[str | None]:
        """The values of ``column`` at rows ``local`` (sorted ascending) of record batch ``batch``."""
        # Plain Python ints and struct, no numpy per run: a lookup of 32 rows x 6 columns is ~200 runs,
        # where numpy's per-call overhead would cost more than the reads.
        validity, offsets_at, data_at, shift = self._spans[batch][self.columns[column]]
        rows = [int(r) + shift for r in local]
        read = self.file.read
        out: list[str | None] = []
        i, n = 0, len(rows)
        while i < n:
            j = i
            while j + 1 < n and rows[j + 1] - rows[j] <= RUN_GAP:
                j += 1
            lo, hi = rows[i], rows[j]
            offsets = struct.unpack_from(f"<{hi - lo + 2}i", read(offsets_at + 4 * lo, 4 * (hi - lo + 2)))
            base = offsets[0]
            blob = read(data_at + base, offsets[-1] - base) if data_at >= 0 else b""
            first_bit = (lo // 8) * 8
            bits = read(validity + lo // 8, hi // 8 - lo // 8 + 1) if validity >= 0 else b""
            for r in rows[i : j + 1]:
                if bits and not (bits[(r - first_bit) >> 3] >> ((r - first_bit) & 7)) & 1:
                    out.append(None)
                else:
                    out.append(blob[offsets[r - lo] - base : offsets[r - lo + 1] - base].decode("utf-8"))
            i = j + 1
        return out


def _map(path: Path) -> mmap.mmap:
    with open(path, "rb") as fh:
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def _locate(mapped: mmap.mmap, path: Path, columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Rows per batch, and per batch and column: (validity, offsets, data) file offsets (-1 = none) and
    the array's own offset."""
    whole = pa.py_buffer(mapped)
    base = whole.address
    reader = pa.ipc.open_file(pa.BufferReader(whole))
    names = reader.schema.names
    for name in columns:
        if name not in names or reader.schema.field(name).type != pa.string():
            raise ValueError(f"{path}: column {name!r} is missing or not a string column")
    rows = np.zeros(reader.num_record_batches, dtype=np.int64)
    layout = np.full((reader.num_record_batches, len(columns), 4), -1, dtype=np.int64)
    for b in range(reader.num_record_batches):
        batch = reader.get_batch(b)
        rows[b] = batch.num_rows
        for j, name in enumerate(columns):
            array: Any = batch.column(names.index(name))
            validity, offsets, data = array.buffers()
            if offsets is None:  # an empty batch
                continue
            spans = [_file_offset(buf, base, len(mapped), path) for buf in (validity, offsets, data)]
            layout[b, j] = [*spans, array.offset]
    del reader, whole
    return rows, layout


def _file_offset(buf: pa.Buffer | None, base: int, size: int, path: Path) -> int:
    if buf is None or buf.size == 0:  # an empty buffer (e.g. the data of an all-null batch) is not read
        return -1
    at = buf.address - base
    if not 0 <= at <= size:  # a decoded (compressed) buffer lives in RAM, not in the file
        raise ValueError(f"{path}: a buffer is not in the file (compressed IPC?): write it uncompressed")
    return int(at)


class NpyRows:
    """Rows of a C-ordered 2-D ``.npy`` file, read with ``pread`` (``rows[idx]`` for an index array)."""

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read_header(fh)
            self._start = fh.tell()
        if len(shape) != 2 or fortran:
            raise ValueError(f"{path}: expected a C-ordered 2-D array, got shape {shape} (fortran={fortran})")
        self.path, self.shape, self.dtype = path, (int(shape[0]), int(shape[1])), np.dtype(dtype)
        self._row_bytes = self.shape[1] * self.dtype.itemsize
        self.file = PositionalFile(path)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: Any) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if len(rows) and (rows.min() < 0 or rows.max() >= self.shape[0]):
            raise IndexError(f"{self.path}: row out of range 0..{self.shape[0] - 1}")
        order = np.argsort(rows, kind="stable")
        out = np.empty((len(rows), self.shape[1]), dtype=self.dtype)
        sorted_rows = rows[order]
        breaks = np.flatnonzero(np.diff(sorted_rows) > 1) + 1
        at = 0
        for run in np.split(sorted_rows, breaks):
            if not len(run):
                continue
            lo, hi = int(run[0]), int(run[-1])
            raw = self.file.read(self._start + lo * self._row_bytes, (hi - lo + 1) * self._row_bytes)
            block = np.frombuffer(raw, dtype=self.dtype).reshape(hi - lo + 1, self.shape[1])
            out[order[at : at + len(run)]] = block[run - lo]
            at += len(run)
        return out
