"""Per-source indexes: FAISS (flat L2 as in the QA paper, IVF-PQ, HNSW) built from embedding shards, and BM25.

``faiss`` and ``bm25s`` are imported inside functions so the library imports without them. Indexes are
built streaming, shard by shard: IVF/PQ train on a seeded sample, then vectors are added one shard at a
time, so only the flat index ever needs every vector in memory. When faiss sees GPUs (the ``gpu`` extra),
flat and IVF indexes are trained and filled on all of them and copied back to the CPU for saving.

Scores follow BEIR (higher is better): ``-distance`` for ``l2``, the inner product for ``ip``.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medagent.retrieval.config import IndexConfig
from medagent.retrieval.layout import read_shard, replace_dir
from medagent.retrieval.pread import NpyRows
from medagent.retrieval.store import take_ids

log = logging.getLogger(__name__)

KINDS = ("flat", "ivfpq", "hnsw")
HNSW_STORAGE = ("flat", "sq8", "pq")


def _metric(metric: str) -> int:
    import faiss

    if metric not in ("l2", "ip"):
        raise ValueError(f"metric must be l2 or ip, got {metric!r}")
    return int(faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT)


def validate_index(cfg: IndexConfig, dim: int) -> None:
    """Raises ValueError for an index configuration that could not be built for ``dim``-vectors."""
    if cfg.kind not in KINDS:
        raise ValueError(f"index.kind must be one of {KINDS}, got {cfg.kind!r}")
    if cfg.kind == "hnsw" and cfg.hnsw_storage not in HNSW_STORAGE:
        raise ValueError(f"index.hnsw_storage must be one of {HNSW_STORAGE}, got {cfg.hnsw_storage!r}")
    uses_pq = cfg.kind == "ivfpq" or (cfg.kind == "hnsw" and cfg.hnsw_storage == "pq")
    if uses_pq and dim % cfg.pq_m:
        raise ValueError(f"index.pq_m={cfg.pq_m} must divide the dimension {dim}")
    if cfg.refine_factor < 0:
        raise ValueError(f"index.refine_factor must be >= 0, got {cfg.refine_factor}")


def needs_training(cfg: IndexConfig) -> bool:
    return cfg.kind == "ivfpq" or (cfg.kind == "hnsw" and cfg.hnsw_storage != "flat")


def effective_kind(cfg: IndexConfig, n: int) -> str:
    """The kind actually built: a source too small to train a quantizer gets an exact flat index."""
    if cfg.kind not in KINDS:
        raise ValueError(f"index.kind must be one of {KINDS}, got {cfg.kind!r}")
    if needs_training(cfg) and n < 4 * 2**cfg.pq_nbits:
        log.warning("%d vectors are too few to train %s; building a flat index instead", n, cfg.kind)
        return "flat"
    return cfg.kind


def new_index(cfg: IndexConfig, kind: str, dim: int, metric: str, n: int) -> tuple[Any, dict[str, Any]]:
    """An empty FAISS index of ``kind`` and the parameters chosen for it."""
    import faiss as faiss_module

    # faiss's bundled stubs miss constructor overloads that the library accepts (IndexHNSWSQ/PQ).
    faiss: Any = faiss_module

    m = _metric(metric)
    if kind == "flat":
        return faiss.IndexFlat(dim, m), {}
    validate_index(cfg, dim)
    if kind == "ivfpq":
        n_train = min(n, cfg.train_size)
        nlist = cfg.nlist or max(1, min(int(4 * math.sqrt(n)), n_train // 39))
        ivf: Any = faiss.IndexIVFPQ(faiss.IndexFlat(dim, m), dim, nlist, cfg.pq_m, cfg.pq_nbits, m)
        ivf.nprobe = cfg.nprobe
        return ivf, {"nlist": nlist, "pq_m": cfg.pq_m, "pq_nbits": cfg.pq_nbits, "nprobe": cfg.nprobe}
    index: Any
    if cfg.hnsw_storage == "flat":
        index = faiss.IndexHNSWFlat(dim, cfg.hnsw_m, m)
    elif cfg.hnsw_storage == "sq8":
        index = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_8bit, cfg.hnsw_m, m)
    else:
        index = faiss.IndexHNSWPQ(dim, cfg.pq_m, cfg.hnsw_m, cfg.pq_nbits, m)
    index.hnsw.efConstruction = cfg.ef_construction
    index.hnsw.efSearch = cfg.ef_search
    params = {"hnsw_m": cfg.hnsw_m, "storage": cfg.hnsw_storage, "ef_construction": cfg.ef_construction}
    return index, {
        **params,
        "ef_search": cfg.ef_search,
        **({"pq_m": cfg.pq_m} if cfg.hnsw_storage == "pq" else {}),
    }


def _training_sample(shards: Sequence[Path], n: int, size: int, seed: int) -> np.ndarray:
    """A seeded sample of ``size`` vectors drawn across all shards (the same sample on every rerun)."""
    take = np.sort(np.random.default_rng(seed).choice(n, size=min(size, n), replace=False))
    parts: list[np.ndarray] = []
    offset = 0
    for path in shards:
        _, vecs = read_shard(path)
        local = take[(take >= offset) & (take < offset + len(vecs))] - offset
        if len(local):
            parts.append(vecs[local])
        offset += len(vecs)
    return np.concatenate(parts)


def _to_gpus(index: Any, kind: str, use_gpu: bool) -> tuple[Any, bool]:
    import faiss

    if use_gpu and kind in ("flat", "ivfpq") and hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0:
        return faiss.index_cpu_to_all_gpus(index), True
    return index, False


@dataclass
class BuiltIndex:
    """A finished FAISS index with its ids (vector i is chunk ``ids[i]``) and what was built."""

    index: Any
    ids: list[str]
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def build_dense_index(
    cfg: IndexConfig, shards: Sequence[Path], n: int, dim: int, metric: str, vectors_path: Path | None = None
) -> BuiltIndex:
    """Train (when needed) and fill an index from ``shards`` in order.

    Args:
        cfg: Index configuration.
        shards: Shard files in order; their concatenation is the source's vectors.
        n: Total vectors in ``shards``.
        dim: Vector dimension.
        metric: ``l2`` or ``ip``.
        vectors_path: Also write every vector to this ``.npy`` (for ``refine_factor`` re-ranking from disk).
    """
    import faiss

    kind = effective_kind(cfg, n)
    index, params = new_index(cfg, kind, dim, metric, n)
    index, on_gpu = _to_gpus(index, kind, cfg.use_gpu)
    timings: dict[str, float] = {}
    if not index.is_trained:
        t = time.perf_counter()
        # k-means (IVF, PQ) and HNSW levels use FAISS's fixed default seeds: reruns build the same index.
        index.train(_training_sample(shards, n, cfg.train_size, cfg.seed))
        timings["train_s"] = time.perf_counter() - t
    t = time.perf_counter()
    store = None
    if vectors_path is not None:
        vectors_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = vectors_path.with_name(f".{vectors_path.name}.tmp-{os.getpid()}")
        store = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, dim))
    ids: list[str] = []
    for path in shards:
        shard_ids, vecs = read_shard(path)
        if vecs.shape[1] != dim:
            raise ValueError(f"{path}: vectors have dimension {vecs.shape[1]}, expected {dim}")
        if store is not None:
            store[len(ids) : len(ids) + len(vecs)] = vecs
        index.add(vecs)
        ids.extend(shard_ids)
    if len(ids) != n:
        raise ValueError(f"shards hold {len(ids)} vectors, expected {n}")
    if store is not None and vectors_path is not None:
        store.flush()
        del store
        os.replace(tmp, vectors_path)
    timings["add_s"] = time.perf_counter() - t
    if on_gpu:
        index = faiss.index_gpu_to_cpu(index)
    return BuiltIndex(index, ids, kind, {**params, "gpu_build": on_gpu}, timings)


def save_faiss(index: Any, path: Path) -> None:
    import faiss

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    faiss.write_index(index, str(tmp))
    os.replace(tmp, path)


def bytes_per_vector(index: Any) -> float:
    """Serialized size per vector: what the index costs in RAM once loaded (codes, lists, graph)."""
    import faiss

    return float(len(faiss.serialize_index(index))) / max(1, index.ntotal)


class DenseIndex:
    """A loaded FAISS index of one source, with optional exact re-ranking from on-disk vectors.

    Args:
        index: The FAISS index (vector i is chunk ``ids[i]``).
        ids: Chunk ids in vector order: a list, or the text store's ``StoreIds`` (read from disk on
            demand, so a replica holds no Python string per chunk).
        metric: ``l2`` or ``ip``.
        vectors: The full vectors, read from disk by row (``refine_factor`` > 0), else ``None``.
        refine_factor: Candidates per result re-ranked exactly (0 = off).
    """

    def __init__(self, index: Any, ids: Sequence[str], metric: str, vectors: np.ndarray | NpyRows | None = None,
                 refine_factor: int = 0) -> None:  # fmt: skip
        if index.ntotal != len(ids):
            raise ValueError(f"index holds {index.ntotal} vectors but {len(ids)} ids")
        self.index, self.ids, self.metric = index, ids, metric
        self.vectors = vectors
        self.refine_factor = refine_factor if vectors is not None else 0

    @classmethod
    def load(cls, path: Path, ids: Sequence[str], metric: str, kind: str, params: dict[str, Any],
             vectors_path: Path | None = None, refine_factor: int = 0, use_gpu: bool = False) -> DenseIndex:  # fmt: skip
        """Read a saved index and set its search parameters (``nprobe``, ``ef_search``)."""
        import faiss

        index: Any = faiss.read_index(str(path))
        if "nprobe" in params:
            faiss.extract_index_ivf(index).nprobe = int(params["nprobe"])
        if "ef_search" in params:
            index.hnsw.efSearch = int(params["ef_search"])
        index, _ = _to_gpus(index, kind, use_gpu)
        # Refinement reads scattered vectors with pread: mapped, they would grow the replica's RSS towards
        # the file's size (medagent.retrieval.pread).
        vectors = NpyRows(vectors_path) if vectors_path and refine_factor > 0 else None
        return cls(index, ids, metric, vectors, refine_factor)

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Top ``k`` ``(chunk_id, score)`` per query, best first."""
        k = min(k, len(self.ids))
        if k <= 0:
            return [[] for _ in range(len(queries))]
        fetch = min(len(self.ids), k * self.refine_factor) if self.refine_factor else k
        dist, idx = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), fetch)
        out: list[list[tuple[str, float]]] = []
        for qi in range(len(queries)):
            cand = idx[qi][idx[qi] >= 0]
            if self.vectors is not None and len(cand):
                vecs = np.asarray(self.vectors[cand])
                if self.metric == "l2":
                    scores = -((vecs - queries[qi]) ** 2).sum(axis=1)
                else:
                    scores = vecs @ queries[qi]
            else:
                raw = dist[qi][: len(cand)]
                scores = -raw if self.metric == "l2" else raw
            top = np.argsort(-scores, kind="stable")[:k]
            names = take_ids(self.ids, cand[top])
            out.append([(name, float(scores[j])) for name, j in zip(names, top, strict=True)])
        return out


# BM25 -----------------------------------------------------------------------------------------------------
def bm25_tokenize(texts: Sequence[str]) -> list[list[str]]:
    """The one tokenizer for BM25 documents and queries (lower-case words, English stop words removed)."""
    import bm25s

    return bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)  # type: ignore[no-any-return]


def build_bm25(texts: Sequence[str], out_dir: Path) -> None:
    """Index ``texts`` (in vector order) with bm25s and save it to ``out_dir`` (replaced when present)."""
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(bm25_tokenize(texts), show_progress=False)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    retriever.save(str(tmp), show_progress=False)
    replace_dir(tmp, out_dir)


class BM25Index:
    """A loaded bm25s index of one source; document i is chunk ``ids[i]``.

    Its sparse matrix is memory-mapped (``mmap=True``): only the posting pages of the query terms are read.
    """

    def __init__(self, path: Path, ids: Sequence[str]) -> None:
        import bm25s

        self.retriever = bm25s.BM25.load(str(path), show_progress=False, mmap=True)
        self.ids = ids

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """Top ``k`` ``(chunk_id, score)`` per query, best first; documents sharing no term are left out."""
        k = min(k, len(self.ids))
        if k <= 0:
            return [[] for _ in queries]
        docs, scores = self.retriever.retrieve(bm25_tokenize(queries), k=k, show_progress=False)
        out = []
        for qi in range(len(queries)):
            keep = scores[qi] > 0
            names = take_ids(self.ids, docs[qi][keep])
            out.append([(n, float(s)) for n, s in zip(names, scores[qi][keep], strict=True)])
        return out
