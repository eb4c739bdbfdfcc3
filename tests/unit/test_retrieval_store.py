"""The on-disk text store: round trip, id lookup (missing ids, hash collisions), reads that leave the text
on disk, and the refusal of an index folder built before it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from medagent.retrieval import store as store_mod
from medagent.retrieval.store import StoreIds, TextStore, write_store
from tests.unit._retrieval_fakes import build_tiny_index


def _rows(n: int, start: int = 0, parent: bool = False) -> pa.Table:
    ids = [f"{'p' if parent else 'c'}{i}" for i in range(start, start + n)]
    return pa.table(
        {
            "id": ids,
            "doc_id": [f"d{i // 3}" for i in range(start, start + n)],
            "parent_id": [None if parent else f"p{i // 3}" for i in range(start, start + n)],
            "title": [f"title {i}" for i in range(start, start + n)],
            "content": [f"content of row {i} " * 4 for i in range(start, start + n)],
            "source": ["src"] * n,
            "ordinal": list(range(start, start + n)),  # an extra block column: dropped
        }
    )


@pytest.fixture
def stem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(store_mod, "BATCH_ROWS", 7)  # several record batches, blocks straddling them
    stem = tmp_path / "index" / "src.store"
    n = write_store(stem, [_rows(5), _rows(12, 5), _rows(3, 17)], [_rows(4, parent=True)])
    assert n == 20
    return stem


def test_round_trip_in_order_with_chunks_first(stem: Path) -> None:
    s = TextStore(stem)
    assert (len(s), s.n_chunks) == (24, 20)
    assert list(StoreIds(s)) == [f"c{i}" for i in range(20)]  # vector order: row i is vector i
    got = s.get(["c13", "p2", "c0", "c19"])
    assert [r.id for r in got] == ["c13", "p2", "c0", "c19"]
    assert got[0].content == "content of row 13 " * 4 and got[0].parent_id == "p4" and got[0].doc_id == "d4"
    assert got[1].parent_id is None and got[1].title == "title 2"
    assert StoreIds(s)[-1] == "c19" and StoreIds(s)[3:5] == ["c3", "c4"]


def test_missing_ids_raise_a_clear_error(stem: Path) -> None:
    s = TextStore(stem)
    assert s.find(["c1", "nope", "p0"]).tolist() == [1, -1, 20]
    with pytest.raises(KeyError, match=r"2 id\(s\) not in .*src\.store\.arrow.*'nope'.*'gone'"):
        s.get(["c1", "nope", "gone"])
    with pytest.raises(IndexError):
        StoreIds(s)[20]  # parents are not vectors


def test_hash_collisions_are_resolved_by_the_stored_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every id hashes to one of two values: each lookup must compare the ids of its colliding rows.
    monkeypatch.setattr(
        store_mod, "id_hashes", lambda ids: np.array([len(i) % 2 for i in ids], dtype=np.uint64)
    )
    stem = tmp_path / "s.store"
    write_store(stem, [_rows(30)])
    s = TextStore(stem)
    assert [r.id for r in s.get(["c7", "c22", "c10"])] == ["c7", "c22", "c10"]
    assert s.find(["c99"]).tolist() == [-1]


def test_opening_and_reading_neither_load_nor_map_the_text(tmp_path: Path) -> None:
    big = pa.table({**{c: _rows(2000).column(c) for c in ("id", "doc_id", "parent_id", "title", "source")},
                    "content": ["x" * 2000] * 2000})  # fmt: skip
    stem = tmp_path / "big.store"
    write_store(stem, [big])
    arrow = stem.with_name("big.store.arrow")
    assert arrow.stat().st_size > 4_000_000
    before = pa.total_allocated_bytes()
    s = TextStore(stem)
    docs = s.get([f"c{i}" for i in range(0, 2000, 97)])
    assert len(docs) == 21 and docs[3].content == "x" * 2000
    # Nothing of the 4 MB is held by Arrow, and the file is not mapped into the process: a mapped page
    # would count in the replica's RSS (medagent.retrieval.pread).
    assert pa.total_allocated_bytes() - before < 200_000
    maps = Path("/proc/self/maps")
    if maps.exists():
        assert str(arrow) not in maps.read_text()
    assert isinstance(s.keys, np.memmap) and isinstance(s.rows, np.memmap)


def test_a_missing_store_file_is_named(stem: Path) -> None:
    stem.with_name(stem.name + ".keys.npy").unlink()
    with pytest.raises(FileNotFoundError, match="keys.npy"):
        TextStore(stem)


def test_an_index_built_before_the_store_is_refused_with_how_to_rebuild(tmp_path: Path) -> None:
    from medagent.retrieval.search import Searcher

    build_tiny_index(tmp_path, {"notes": [{"id": "n1", "title": "t", "content": "aspirin and platelets"}]})
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["format"] = 1
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FileNotFoundError, match=r"format 1.*pipelines\.index_corpus out_dir=.*resumes"):
        Searcher(tmp_path)
