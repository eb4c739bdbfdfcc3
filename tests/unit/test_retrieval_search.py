"""Searcher: BEIR result shape, per-source TopK, RRF, parent–child search, document lookup, manifests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medagent.retrieval.config import ChunkingConfig
from medagent.retrieval.layout import IndexLayout
from medagent.retrieval.search import Searcher, rrf
from tests.unit._retrieval_fakes import build_tiny_index, fake_encode

pytest.importorskip("faiss")

GUIDE = (
    "chest pain radiating to the left arm suggests acute coronary syndrome obtain an ecg within ten minutes "
    "give aspirin unless contraindicated troponin should be measured at presentation and repeated "
    "asthma exacerbation is treated with inhaled salbutamol and oral steroids oxygen saturation guides therapy "
    "sepsis requires blood cultures antibiotics within one hour and fluids for hypotension"
)
SOURCES = {
    "guides": [{"id": "g1", "title": "Guideline", "content": GUIDE}],
    "notes": [
        {
            "id": "n1",
            "title": "Aspirin",
            "content": "aspirin inhibits platelets and is given in acute coronary syndrome",
        },
        {"id": "n2", "title": "Insulin", "content": "insulin lowers blood glucose in diabetes"},
        {
            "id": "n3",
            "title": "Salbutamol",
            "content": "salbutamol relaxes bronchial smooth muscle in asthma",
        },
        {"id": "n1", "title": "Duplicate", "content": "a second record with an id already taken"},
        {"id": "n4", "title": "", "content": "   "},
    ],
}
QUERIES = {"q1": "aspirin acute coronary syndrome", "q2": "asthma salbutamol"}


@pytest.fixture
def index(tmp_path: Path) -> Path:
    build_tiny_index(tmp_path, SOURCES)
    return tmp_path


def test_results_are_beir_shaped_with_top_k_per_source(index: Path) -> None:
    searcher = Searcher(index, query_encoder=fake_encode)
    res = searcher.search(QUERIES, top_k=2)
    assert set(res) == {"q1", "q2"}
    for hits in res.values():
        scores = list(hits.values())
        assert scores == sorted(scores, reverse=True) and all(isinstance(s, float) for s in scores)
        by_source: dict[str, int] = {}
        for doc_id in hits:
            src = searcher.lookup(doc_id).source
            by_source[src] = by_source.get(src, 0) + 1
        assert by_source == {"guides": 2, "notes": 2}
    top_note = next(iter(searcher.search(QUERIES, top_k=2, sources=["notes"])["q1"]))
    assert searcher.lookup(top_note).doc_id == "n1"
    assert searcher.search(QUERIES, top_k=1, sources=["notes"])["q2"].keys() == {"n3#0"}


def test_bm25_and_hybrid_modes(index: Path) -> None:
    searcher = Searcher(index, query_encoder=fake_encode)
    lexical = searcher.search({"q": "insulin glucose"}, top_k=3, mode="bm25", sources=["notes"])
    assert list(lexical["q"]) == ["n2#0"]  # documents sharing no term are not returned
    hybrid = searcher.search(QUERIES, top_k=3, mode="hybrid", sources=["notes"])
    assert searcher.lookup(next(iter(hybrid["q1"]))).doc_id == "n1" and next(iter(hybrid["q2"])) == "n3#0"
    assert all(0 < s <= 2 / 61 for hits in hybrid.values() for s in hits.values())


def test_rrf_sums_reciprocal_ranks() -> None:
    fused = rrf([["a", "b", "c"], ["b", "d"]], k=60)
    assert list(fused) == ["b", "a", "d", "c"]
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61) and fused["d"] == pytest.approx(1 / 62)


def test_parent_child_search_returns_parents(tmp_path: Path) -> None:
    chunking = ChunkingConfig(mode="parent_child", size=6, overlap=0, parent_size=24, min_words=0)
    build_tiny_index(tmp_path, {"guides": SOURCES["guides"]}, chunking=chunking)
    searcher = Searcher(tmp_path, query_encoder=fake_encode)
    children = searcher.search({"q": "sepsis blood cultures antibiotics"}, top_k=3, mode="hybrid")["q"]
    assert all("." in d.split("#")[1] for d in children)  # children: {doc}#{parent}.{child}
    parents = searcher.search(
        {"q": "sepsis blood cultures antibiotics"}, top_k=2, mode="hybrid", return_parents=True
    )["q"]
    assert all("." not in d.split("#")[1] for d in parents)
    best = searcher.lookup(next(iter(parents)))
    assert "sepsis" in best.content and best.parent_id == "g1" and best.doc_id == "g1"
    child = searcher.lookup(next(iter(children)))
    assert child.parent_id is not None and child.content in searcher.lookup(child.parent_id).content


def test_lookup_and_rejections_from_the_manifest(index: Path) -> None:
    searcher = Searcher(index, query_encoder=fake_encode)
    doc = searcher.lookup("n2#0")
    assert (doc.title, doc.source, doc.doc_id, doc.parent_id) == ("Insulin", "notes", "n2", "n2")
    assert searcher.lookup("n2").content.startswith("insulin")  # the whole document, kept as the parent
    with pytest.raises(KeyError):
        searcher.lookup("nope")
    manifest = json.loads(IndexLayout(index).manifest.read_text())
    notes = manifest["sources"]["notes"]
    assert (notes["documents"], notes["chunks"], notes["vectors"], notes["rejected"]) == (3, 4, 4, 2)
    assert notes["rejected_by_reason"] == {"duplicate id": 1, "empty content": 1}
    assert notes["index"]["kind"] == "flat" and notes["shard_files"] and notes["index_files"]
    assert (
        manifest["embedder"]["dimension"] == 32
        and manifest["totals"]["vectors"] == 4 + manifest["sources"]["guides"]["vectors"]
    )


def test_bad_requests_fail_clearly(index: Path, tmp_path: Path) -> None:
    searcher = Searcher(index, query_encoder=fake_encode)
    with pytest.raises(ValueError, match="mode must be one of"):
        searcher.search(QUERIES, mode="sparse")
    with pytest.raises(ValueError, match=r"unknown source\(s\) \['pubmed'\]"):
        searcher.search(QUERIES, sources=["pubmed"])
    with pytest.raises(FileNotFoundError, match="unfinished or absent"):
        Searcher(tmp_path / "empty")
