"""The streamed BM25 build scores as bm25s's in-memory build does, whatever the batch size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from medagent.retrieval import bm25
from medagent.retrieval.bm25 import build_bm25_streaming
from medagent.retrieval.index import BM25Index, build_bm25

TEXTS = [
    "Aspirin for stroke prevention in atrial fibrillation",
    "Insulin therapy in type 1 diabetes; insulin pumps",
    "Stroke rehabilitation after aspirin and clopidogrel",
    "",  # an empty chunk keeps its place
    "Clopidogrel blocks the P2Y12 receptor; aspirin blocks COX-1 aspirin aspirin",
    "Metformin in type 2 diabetes",
    "the of and",  # stop words only
] + [f"synthetic chunk {i} about diabetes stroke and insulin dose {i % 7}" for i in range(40)]
QUERIES = ["insulin diabetes", "aspirin stroke", "clopidogrel P2Y12", "zebra", "dose 3 insulin", "the"]


def _batches(texts: list[str], size: int) -> list[list[str]]:
    return [texts[i : i + size] for i in range(0, len(texts), size)]


@pytest.mark.parametrize(("batch", "window"), [(1, 3), (5, 40), (1000, 4_000_000)])
def test_streamed_index_ranks_and_scores_as_bm25s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int, window: int
) -> None:
    monkeypatch.setattr(bm25, "WINDOW_POSTINGS", window)  # several windows, each written term by term
    ids = [f"c{i}" for i in range(len(TEXTS))]
    build_bm25(TEXTS, tmp_path / "ref")
    assert build_bm25_streaming(_batches(TEXTS, batch), tmp_path / "new") == len(TEXTS)
    ref, new = BM25Index(tmp_path / "ref", ids), BM25Index(tmp_path / "new", ids)
    for want, got in zip(ref.search(QUERIES, 10), new.search(QUERIES, 10), strict=True):
        assert dict(got).keys() == dict(want).keys()
        for doc, score in want:
            assert dict(got)[doc] == pytest.approx(score, rel=1e-5)


def test_rebuild_replaces_the_folder(tmp_path: Path) -> None:
    build_bm25_streaming([TEXTS], tmp_path / "bm25")
    build_bm25_streaming([["aspirin only"]], tmp_path / "bm25")
    assert BM25Index(tmp_path / "bm25", ["a"]).search(["aspirin"], 5)[0][0][0] == "a"
    assert not list(tmp_path.glob(".bm25.tmp-*"))
    assert np.load(tmp_path / "bm25" / "indptr.csc.index.npy")[-1] == 2  # aspirin, only
