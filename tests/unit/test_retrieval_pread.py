"""Positional reads of Arrow string columns and .npy rows: values, nulls, runs, bounds, refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from medagent.retrieval import pread
from medagent.retrieval.pread import ArrowStrings, NpyRows, PositionalFile


def _write(path: Path, table: pa.Table, batch: int, **options: object) -> None:
    with (
        pa.OSFile(str(path), "wb") as sink,
        pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(**options)) as writer,
    ):
        writer.write_table(table, max_chunksize=batch)


@pytest.fixture
def arrow(tmp_path: Path) -> tuple[Path, list[str | None], list[str]]:
    names = [None if i % 5 == 3 else f"név {i} " + "x" * (i % 7) for i in range(50)]  # nulls, UTF-8
    empty = ["" if i % 2 else f"e{i}" for i in range(50)]
    path = tmp_path / "t.arrow"
    _write(path, pa.table({"a": pa.array(names, pa.string()), "b": pa.array(empty, pa.string())}), 16)
    return path, names, empty


def test_values_match_arrow_across_batches_runs_and_nulls(
    arrow: tuple[Path, list[str | None], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, names, empty = arrow
    for gap in (0, 8, 100):  # every row its own read; nearby rows as runs; a whole batch in one run
        monkeypatch.setattr(pread, "RUN_GAP", gap)
        cols = ArrowStrings(path, ["a", "b"])
        assert cols.batch_rows.tolist() == [16, 16, 16, 2]
        for b, start in enumerate((0, 16, 32, 48)):
            local = np.array([i for i in range(cols.batch_rows[b]) if i % 3 != 1])
            assert cols.values(b, "a", local) == [names[start + i] for i in local]
            assert cols.values(b, "b", local) == [empty[start + i] for i in local]


def test_a_sliced_table_keeps_its_row_offsets(tmp_path: Path) -> None:
    values = [f"row {i}" if i % 4 else None for i in range(40)]
    path = tmp_path / "s.arrow"
    _write(path, pa.table({"a": pa.array(values, pa.string())}).slice(9, 20), 7)
    cols = ArrowStrings(path, ["a"])
    got = [v for b, n in enumerate(cols.batch_rows.tolist()) for v in cols.values(b, "a", np.arange(n))]
    assert got == values[9:29]


def test_the_file_is_unmapped_after_open(arrow: tuple[Path, list[str | None], list[str]]) -> None:
    path, _, _ = arrow
    cols = ArrowStrings(path, ["a"])
    cols.values(0, "a", np.array([0, 1]))
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("no /proc/self/maps on this platform")
    assert str(path) not in maps.read_text()


def test_columns_that_cannot_be_read_so_are_refused(
    tmp_path: Path, arrow: tuple[Path, list[str | None], list[str]]
) -> None:
    path, _, _ = arrow
    with pytest.raises(ValueError, match="'zz' is missing or not a string column"):
        ArrowStrings(path, ["zz"])
    ints = tmp_path / "i.arrow"
    _write(ints, pa.table({"n": [1, 2, 3]}), 2)
    with pytest.raises(ValueError, match="'n' is missing or not a string column"):
        ArrowStrings(ints, ["n"])
    packed = tmp_path / "z.arrow"
    _write(packed, pa.table({"a": ["y" * 500] * 100}), 50, compression="zstd")
    with pytest.raises(ValueError, match="compressed IPC"):
        ArrowStrings(packed, ["a"])


def test_npy_rows_in_any_order_with_repeats(tmp_path: Path) -> None:
    data = np.arange(60, dtype=np.float32).reshape(20, 3)
    np.save(tmp_path / "v.npy", data)
    rows = NpyRows(tmp_path / "v.npy")
    assert (len(rows), rows.shape, rows.dtype) == (20, (20, 3), np.float32)
    idx = np.array([7, 2, 3, 19, 2, 0, 8])
    np.testing.assert_array_equal(rows[idx], data[idx])
    assert rows[np.array([], dtype=np.int64)].shape == (0, 3)
    with pytest.raises(IndexError, match="out of range 0..19"):
        rows[np.array([20])]


def test_npy_rows_refuses_other_layouts(tmp_path: Path) -> None:
    np.save(tmp_path / "one.npy", np.zeros(4, dtype=np.float32))
    with pytest.raises(ValueError, match="C-ordered 2-D"):
        NpyRows(tmp_path / "one.npy")
    np.save(tmp_path / "f.npy", np.asfortranarray(np.zeros((3, 2), dtype=np.float32)))
    with pytest.raises(ValueError, match="fortran=True"):
        NpyRows(tmp_path / "f.npy")


def test_a_truncated_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "short.bin"
    path.write_bytes(b"0123456789")
    f = PositionalFile(path)
    assert f.read(2, 3) == b"234" and f.read(5, 0) == b""
    with pytest.raises(OSError, match="short read at 8 .2 of 4 bytes"):
        f.read(8, 4)
    f.close()
