"""MedRAG-style sources without the hub: a hub corpus's JSONL / parquet shards in a local copy of the
repository (read file by file, lazily), user-supplied NEJM case reports, and ``limit`` counting accepted
documents in the driver's ChunkSink."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from medagent.retrieval.build import ChunkSink
from medagent.retrieval.chunking import chunk_batch
from medagent.retrieval.config import ChunkingConfig, SourceConfig
from medagent.retrieval.corpus import (
    Document,
    RawRecord,
    RejectedRecord,
    normalize_batch,
    normalize_record,
    open_source,
    record_rows,
)
from medagent.retrieval.layout import IndexLayout


def _snippets(prefix: str, n: int) -> list[dict[str, str]]:
    return [
        {
            "id": f"{prefix}_{i}",
            "title": f"Title {prefix} {i}",
            "content": f"Text {i} of {prefix}.",
            "contents": f"Title {prefix} {i}. Text {i} of {prefix}.",
        }  # fmt: skip
        for i in range(n)
    ]


def _repo(root: Path, shards: dict[str, list[dict[str, str]]], extra: dict[str, str] | None = None) -> Path:
    """A local copy of a MedRAG hub repository: ``chunk/<name>.jsonl`` shards (plus other files)."""
    (root / "chunk").mkdir(parents=True)
    for name, rows in shards.items():
        (root / "chunk" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name, text in (extra or {}).items():
        (root / name).write_text(text)
    return root


def test_hub_corpus_shards_are_listed_now_and_read_one_file_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(
        tmp_path / "MedRAG-pubmed",
        {"pubmed23n0001": _snippets("a", 3), "pubmed23n0002": _snippets("b", 2)},
        {"README.md": "# not data", ".gitattributes": "*.jsonl filter=lfs"},
    )
    src = SourceConfig("pubmed", "medrag_hub", {"repo_id": "MedRAG/pubmed", "url": str(repo)})
    opened = open_source(src, None)
    bulk = opened.bulk
    assert bulk is not None and bulk.format == "jsonl" and bulk.filesystem is not None
    assert [Path(p).name for p in bulk.paths] == ["pubmed23n0001.jsonl", "pubmed23n0002.jsonl"]
    assert bulk.hub == {"repo_id": "MedRAG/pubmed", "revision": "main"}

    opens: list[str] = []
    real_open = bulk.filesystem.open
    monkeypatch.setattr(bulk.filesystem, "open", lambda p, *a, **k: opens.append(p) or real_open(p, *a, **k))
    first = list(islice(opened.records, 3))
    assert [r.data["id"] for r in first] == ["a_0", "a_1", "a_2"]
    assert [Path(p).name for p in opens] == ["pubmed23n0001.jsonl"]  # the second shard is not open yet
    rest = list(opened.records)
    assert [r.data["id"] for r in rest] == ["b_0", "b_1"] and [r.row for r in rest] == [4, 5]
    doc = normalize_record("pubmed", first[0])
    assert isinstance(doc, Document) and doc.content == "Text 0 of a."  # content, not MedRAG's `contents`


def test_hub_parquet_shards_and_malformed_lines(tmp_path: Path) -> None:
    repo = tmp_path / "textbooks"
    (repo / "data").mkdir(parents=True)
    table = pa.Table.from_pylist(_snippets("p", 5))
    pq.write_table(table, repo / "data" / "train-00000.parquet", row_group_size=2)
    src = SourceConfig("t", "medrag_hub", {"repo_id": "x/t", "files": ["data/*.parquet"], "url": str(repo)})
    opened = open_source(src, None)
    assert opened.bulk is not None and opened.bulk.format == "parquet"
    assert [r.data["id"] for r in opened.records] == [f"p_{i}" for i in range(5)]

    bad = _repo(tmp_path / "bad", {"s1": _snippets("a", 1)})
    with (bad / "chunk" / "s1.jsonl").open("a") as fh:
        fh.write('{"id": "cut off\n\n{"id": "", "content": "x"}\n')
    out = [
        normalize_record("s", r)
        for r in open_source(
            SourceConfig("s", "medrag_hub", {"repo_id": "x/y", "url": str(bad)}), None
        ).records
    ]
    assert [o.reason for o in out if isinstance(o, RejectedRecord)] == [
        "invalid JSON (Invalid control character at, column 16)",
        "missing id",
    ]


def test_hub_corpus_without_matching_files_or_mixing_formats_fails_before_reading(tmp_path: Path) -> None:
    empty = _repo(tmp_path / "empty", {})
    with pytest.raises(FileNotFoundError, match="no chunk/\\*.jsonl files in"):
        open_source(SourceConfig("s", "medrag_hub", {"repo_id": "x/y", "url": str(empty)}), None)
    mixed = _repo(tmp_path / "mixed", {"a": _snippets("a", 1)})
    pq.write_table(pa.Table.from_pylist(_snippets("b", 1)), mixed / "chunk" / "b.parquet")
    with pytest.raises(ValueError, match="mixes JSONL and parquet"):
        open_source(
            SourceConfig("s", "medrag_hub", {"repo_id": "x/y", "url": str(mixed), "files": ["chunk/*"]}), None
        )


def test_nejm_case_reports_are_prefixed_and_malformed_ones_set_aside(tmp_path: Path) -> None:
    lines = [
        json.dumps(
            {
                "id": "NEJMcpc2300001",
                "title": "Case 1-2023: A man with fever",
                "content": "A 54-year-old man presented with fever and a rash.",
            }
        ),  # fmt: skip
        json.dumps(
            {
                "id": "NEJMcpc2300001-2",
                "parent_id": "NEJMcpc2300001",
                "title": "Differential",
                "content": "Rocky Mountain spotted fever was considered.",
            }
        ),  # fmt: skip
        json.dumps({"id": True, "content": "a bool id"}),
        json.dumps({"title": "no id", "content": "text"}),
        "not json",
        json.dumps({"id": "NEJMcps1", "content": ""}),
    ]
    (tmp_path / "nejm.jsonl").write_text("\n".join(lines) + "\n")
    out = [
        normalize_record("nejm", r)
        for r in open_source(SourceConfig("nejm", "nejm_case_reports", {"path": str(tmp_path)}), None).records
    ]
    docs = [o for o in out if isinstance(o, Document)]
    assert [(d.id, d.parent_id) for d in docs] == [
        ("nejm:NEJMcpc2300001", None),
        ("nejm:NEJMcpc2300001-2", "nejm:NEJMcpc2300001"),
    ]
    reasons = [o.reason.split(" (")[0] for o in out if isinstance(o, RejectedRecord)]
    assert reasons == ["wrong type: id is bool", "missing id", "invalid JSON", "empty content"]


def _chunk_rows(records: list[Any]) -> dict[str, list[Any]]:
    """The chunk stage's output for ``records`` (what the driver's sink receives from Ray Data)."""
    rows = list(record_rows(iter(RawRecord(i, r) for i, r in enumerate(records, 1))))
    normalized = normalize_batch({k: [r[k] for r in rows] for k in rows[0]}, "s")
    return chunk_batch(normalized, vars(ChunkingConfig(size=4, overlap=0, min_words=0)))


def test_chunk_sink_limit_counts_accepted_documents(tmp_path: Path) -> None:
    """The bulk path cannot stop its reader at the limit (Ray Data reads ahead); the sink does."""
    records: list[Any] = [{"id": f"empty{i}", "content": ""} for i in range(5)]  # MedQuAD's first subsets
    records += [{"id": f"d{i}", "content": f"word {i} " * 6} for i in range(4)]  # 12 words: 3 chunks each
    records.insert(7, "not an object")
    batch = _chunk_rows(records)
    sink = ChunkSink(IndexLayout(tmp_path), "s", 4, set(), limit=2)
    half = len(batch["kind"]) // 2  # split mid-document: rows of one document arrive in two batches
    sink.add({k: v[:half] for k, v in batch.items()})
    assert not sink.full
    sink.add({k: v[half:] for k, v in batch.items()})
    assert sink.full
    stats = sink.finish()
    assert (stats.documents, stats.chunks, stats.rejected) == (2, 6, 6)
    assert stats.rejected_by_reason == {"empty content": 5, "not an object": 1}
    unlimited = ChunkSink(IndexLayout(tmp_path / "all"), "s", 4, set())
    unlimited.add(batch)
    assert not unlimited.full and unlimited.finish().documents == 4
