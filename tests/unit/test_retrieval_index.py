"""FAISS flat / IVF-PQ / HNSW on small random vectors, shards, BM25."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from medagent.retrieval.build import ShardCollector
from medagent.retrieval.config import IndexConfig
from medagent.retrieval.index import (
    BM25Index,
    DenseIndex,
    build_bm25,
    build_dense_index,
    bytes_per_vector,
    effective_kind,
    validate_index,
)
from medagent.retrieval.layout import IndexLayout, read_shard, write_shard

pytest.importorskip("faiss")


def _clustered(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Vectors around 20 centres: structured like real embeddings, unlike uniform noise."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, dim)).astype(np.float32)
    x = centres[rng.integers(0, 20, n)] + 0.3 * rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _shards(tmp_path: Path, x: np.ndarray, size: int) -> list[Path]:
    paths = []
    for k, start in enumerate(range(0, len(x), size)):
        p = tmp_path / f"shard-{k:05d}.parquet"
        part = x[start : start + size]
        write_shard(
            p, [f"c{i}" for i in range(start, start + len(part))], np.arange(start, start + len(part)), part
        )
        paths.append(p)
    return paths


def _brute_force(x: np.ndarray, q: np.ndarray, k: int) -> list[list[str]]:
    d = ((q[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    return [[f"c{i}" for i in np.argsort(row, kind="stable")[:k]] for row in d]


def _recall(got: list[list[tuple[str, float]]], truth: list[list[str]]) -> float:
    return float(np.mean([len({d for d, _ in g} & set(t)) / len(t) for g, t in zip(got, truth, strict=True)]))


def test_shard_round_trip(tmp_path: Path) -> None:
    x = _clustered(10, 8)
    write_shard(tmp_path / "s.parquet", [f"c{i}" for i in range(10)], np.arange(10), x)
    ids, vecs = read_shard(tmp_path / "s.parquet")
    assert ids == [f"c{i}" for i in range(10)] and np.array_equal(vecs, x)


def test_flat_index_is_exact_and_scores_are_negative_l2(tmp_path: Path) -> None:
    x, q = _clustered(300, 16), _clustered(5, 16, seed=1)
    built = build_dense_index(IndexConfig(kind="flat"), _shards(tmp_path, x, 64), 300, 16, "l2")
    assert built.kind == "flat" and built.ids == [f"c{i}" for i in range(300)]
    res = DenseIndex(built.index, built.ids, "l2").search(q, 10)
    assert [[d for d, _ in r] for r in res] == _brute_force(x, q, 10)
    best = int(res[0][0][0][1:])
    assert res[0][0][1] == pytest.approx(-float(((x[best] - q[0]) ** 2).sum()), rel=1e-5)


def test_ivfpq_and_hnsw_find_the_flat_neighbours_in_less_memory(tmp_path: Path) -> None:
    n, dim, k = 3000, 32, 10
    x, q = _clustered(n, dim), _clustered(20, dim, seed=2)
    shards = _shards(tmp_path, x, 512)
    truth = _brute_force(x, q, k)
    flat = build_dense_index(IndexConfig(kind="flat"), shards, n, dim, "l2")
    cases = {
        "ivfpq": IndexConfig(kind="ivfpq", pq_m=8, nprobe=16, refine_factor=4),
        "hnsw": IndexConfig(kind="hnsw", hnsw_storage="pq", pq_m=8, hnsw_m=8, refine_factor=4),
    }
    for kind, cfg in cases.items():
        vectors = tmp_path / f"{kind}.npy"
        built = build_dense_index(cfg, shards, n, dim, "l2", vectors_path=vectors)
        assert built.kind == kind and np.array_equal(np.load(vectors), x)
        refined = DenseIndex(built.index, built.ids, "l2", np.load(vectors, mmap_mode="r"), cfg.refine_factor)
        assert _recall(refined.search(q, k), truth) >= 0.8, kind  # quality is measured by the benchmark
        # At 32 dimensions the HNSW graph (~2·M links of 4 bytes) outweighs the codes; see the benchmark at 384.
        assert bytes_per_vector(built.index) < bytes_per_vector(flat.index), kind


def test_a_source_too_small_to_train_gets_a_flat_index(tmp_path: Path) -> None:
    assert effective_kind(IndexConfig(kind="ivfpq"), 100) == "flat"
    assert effective_kind(IndexConfig(kind="hnsw", hnsw_storage="flat"), 100) == "hnsw"
    with pytest.raises(ValueError, match="index.kind"):
        effective_kind(IndexConfig(kind="lsh"), 100)
    with pytest.raises(ValueError, match="hnsw_storage"):
        validate_index(IndexConfig(kind="hnsw", hnsw_storage="lsq"), 16)
    validate_index(IndexConfig(kind="ivfpq", pq_m=96), 384)
    with pytest.raises(ValueError, match="must divide the dimension"):
        build_dense_index(
            IndexConfig(kind="ivfpq", pq_m=5), _shards(tmp_path, _clustered(2000, 16), 2000), 2000, 16, "l2"
        )


def test_inner_product_scores(tmp_path: Path) -> None:
    x, q = _clustered(50, 8), _clustered(2, 8, seed=3)
    built = build_dense_index(IndexConfig(kind="flat"), _shards(tmp_path, x, 50), 50, 8, "ip")
    res = DenseIndex(built.index, built.ids, "ip").search(q, 3)
    best = int(res[1][0][0][1:])
    assert res[1][0][1] == pytest.approx(float(x[best] @ q[1]), rel=1e-5)
    assert best == int(np.argmax(x @ q[1]))


def test_shard_collector_writes_each_shard_once_complete(tmp_path: Path) -> None:
    layout = IndexLayout(tmp_path)
    collector = ShardCollector(layout, {("s", 0): 3, ("s", 1): 1})
    emb = np.eye(4, dtype=np.float32)

    def rows(idx: list[int]) -> dict[str, object]:
        return {"id": [f"c{i}" for i in idx], "source": ["s"] * len(idx), "shard": [i // 3 for i in idx],
                "ordinal": idx, "embedding": emb[idx]}  # fmt: skip

    assert collector.add(rows([2, 3])) == [("s", 1)]
    assert collector.add(rows([2, 0])) == []  # a retried row is not counted twice
    assert collector.add(rows([1])) == [("s", 0)] and collector.missing() == []
    ids, vecs = read_shard(layout.shard("s", 0))
    assert ids == ["c0", "c1", "c2"] and np.array_equal(vecs, emb[:3])
    with pytest.raises(ValueError, match="unexpected shard"):
        collector.add(rows([0]) | {"shard": [7]})


def test_shard_collector_refuses_a_second_precision_before_writing(tmp_path: Path) -> None:
    layout = IndexLayout(tmp_path)

    def rows(i: int, precision: str) -> dict[str, object]:
        return {"id": [f"c{i}"], "source": ["s"], "shard": [i], "ordinal": [0],
                "embedding": np.eye(2, dtype=np.float32)[[i]], "precision": [precision]}  # fmt: skip

    started = ShardCollector(layout, {("s", 0): 1, ("s", 1): 1})
    assert started.precision is None
    assert started.add(rows(0, "fp32")) == [("s", 0)] and started.precision == "fp32"
    # A job started on CPU (fp32) and resumed where the encoder runs in fp16 is refused, with the fix.
    resumed = ShardCollector(layout, {("s", 1): 1}, precision=started.precision)
    with pytest.raises(ValueError, match=r"fp32 .* fp16.*half_on_gpu=false"):
        resumed.add(rows(1, "fp16"))
    assert not layout.shard("s", 1).exists()
    with pytest.raises(ValueError, match="mixes encoder precisions"):
        resumed.add({**rows(1, "fp32"), "id": ["a", "b"], "precision": ["fp32", "fp16"]})
    assert resumed.add(rows(1, "fp32")) == [("s", 1)]


def test_bm25_ranks_term_matches_and_skips_non_matches(tmp_path: Path) -> None:
    texts = [
        "aspirin for stroke prevention",
        "insulin therapy in diabetes",
        "stroke rehabilitation after aspirin",
    ]
    build_bm25(texts, tmp_path / "bm25")
    bm = BM25Index(tmp_path / "bm25", ["a", "b", "c"])
    res = bm.search(["insulin diabetes", "aspirin stroke", "zebra"], 5)
    assert [d for d, _ in res[0]] == ["b"]
    assert {d for d, _ in res[1]} == {"a", "c"}
    assert res[2] == []
    build_bm25(texts[:1], tmp_path / "bm25")  # rebuilding replaces the folder
    assert [d for d, _ in BM25Index(tmp_path / "bm25", ["a"]).search(["aspirin"], 5)[0]] == ["a"]
