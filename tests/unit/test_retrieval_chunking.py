"""Chunking: word windows, stable ids, the parent–child split, and the Ray Data stage contract."""

from __future__ import annotations

from typing import Any

import pytest

from medagent.retrieval.chunking import (
    chunk_batch,
    chunk_document,
    chunk_documents,
    validate_chunking,
    windows,
)
from medagent.retrieval.config import ChunkingConfig
from medagent.retrieval.corpus import Document


def _doc(n_words: int, doc_id: str = "d1") -> Document:
    return Document(doc_id, "Title", " ".join(f"w{i}" for i in range(n_words)), "src", "pubmed:1")


def test_windows_cover_the_text_with_the_configured_overlap() -> None:
    assert windows(5, 10, 2) == [(0, 5)]
    assert windows(10, 4, 1) == [(0, 4), (3, 7), (6, 10)]
    spans = windows(1000, 128, 16)
    assert spans[0][0] == 0 and spans[-1][1] == 1000
    assert all(b[0] == a[0] + 112 for a, b in zip(spans, spans[1:], strict=False))


def test_a_short_tail_is_merged_into_the_previous_window() -> None:
    # 0-127, 112-239, then 224-245 would add only 5 new words: merged.
    spans = windows(245, 128, 16, min_words=16)
    assert spans[-1] == (112, 245) and len(spans) == 2
    assert windows(245, 128, 16, min_words=0)[-1] == (224, 245)


def test_plain_chunks_have_stable_ids_and_point_to_their_document() -> None:
    cfg = ChunkingConfig(size=50, overlap=10, min_words=5)
    parents, chunks = chunk_document(_doc(200), cfg)
    assert [c.id for c in chunks] == [f"d1#{n}" for n in range(len(chunks))]
    assert all(c.parent_id == "d1" and c.doc_id == "d1" and c.title == "Title" for c in chunks)
    assert chunks[0].content.split()[0] == "w0" and chunks[-1].content.split()[-1] == "w199"
    assert all(len(c.content.split()) <= 50 + 5 for c in chunks)
    # The whole document is the parent; its own parent is the document's parent.
    assert [(p.id, p.parent_id, p.n) for p in parents] == [("d1", "pubmed:1", -1)]
    assert chunk_document(_doc(200), cfg) == (parents, chunks)


def test_parent_child_split_indexes_children_and_keeps_parent_ids() -> None:
    cfg = ChunkingConfig(mode="parent_child", size=20, overlap=4, parent_size=60, min_words=12)
    parents, children = chunk_document(_doc(130), cfg)
    assert [p.id for p in parents] == ["d1#0", "d1#1"]  # 0-59, 60-129 (a 10-word tail is merged)
    assert all(p.parent_id == "d1" for p in parents)
    by_id = {p.id: p for p in parents}
    for child in children:
        pid, _, c = child.id.partition(".")
        assert child.parent_id == pid and c.isdigit()
        assert child.content in by_id[pid].content
    assert {c.parent_id for c in children} == {"d1#0", "d1#1"}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": 10, "overlap": 10},
        {"size": 0},
        {"mode": "sentences"},  # an unknown mode is refused when the config is built (a closed set)
        {"mode": "parent_child", "size": 100, "parent_size": 50},
    ],
)
def test_impossible_settings_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="chunking"):
        validate_chunking(ChunkingConfig(**kwargs))


def test_chunk_documents_streams_only_indexed_chunks() -> None:
    chunks = list(
        chunk_documents([_doc(30, "a"), _doc(30, "b")], ChunkingConfig(size=20, overlap=0, min_words=0))
    )
    assert [c.id for c in chunks] == ["a#0", "a#1", "b#0", "b#1"]


def test_chunk_stage_keeps_rows_of_a_document_together_and_passes_rejections_on() -> None:
    batch = {
        "id": ["a", "", "b"],
        "title": ["T", "", ""],
        "content": [" ".join(["x"] * 30), "", "y z"],
        "source": ["s", "s", "s"],
        "parent_id": [None, None, "p"],
        "row": [1, 2, 3],
        "error": ["", "empty content", ""],
        "raw": ["", '{"id": ""}', ""],
    }
    out = chunk_batch(batch, {"size": 20, "overlap": 0, "min_words": 0})
    assert out["kind"] == ["parent", "chunk", "chunk", "rejected", "parent", "chunk"]
    assert out["id"] == ["a", "a#0", "a#1", "", "b", "b#0"]
    assert out["error"][3] == "empty content" and out["row"][3] == 2


def test_chunk_stage_names_itself_when_a_column_is_missing() -> None:
    with pytest.raises(ValueError, match=r"chunk: input batch lacks required column\(s\) \['raw'\]"):
        chunk_batch({k: [] for k in ("id", "title", "content", "source", "parent_id", "row", "error")}, {})
