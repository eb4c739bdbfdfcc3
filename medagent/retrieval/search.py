"""Search a built index: per-source TopK, BEIR-shaped results, document lookup.

``Searcher`` reads ``manifest.json`` of an index folder and loads each source's FAISS index, BM25 index
and chunk store lazily, on first use. ``search`` returns ``query_id -> {doc_id: score}`` (higher is
better) holding up to ``top_k`` documents *per source*, as seed A retrieves TopK from every source before
reranking. Modes: ``dense``, ``bm25``, ``hybrid`` (reciprocal-rank fusion of the two). With
``return_parents`` the indexed children are searched and their parents returned (seed B): a parent scores
as its best child.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from medagent.config import to_dataclass
from medagent.retrieval.config import EmbedderConfig, IndexConfig
from medagent.retrieval.index import BM25Index, DenseIndex
from medagent.retrieval.layout import IndexLayout, read_json

log = logging.getLogger(__name__)

MODES = ("dense", "bm25", "hybrid")
RRF_K = 60  # Cormack et al.'s constant; larger values flatten the contribution of top ranks
QueryEncoder = Callable[[list[str]], np.ndarray]
Results = dict[str, dict[str, float]]


@dataclass(frozen=True)
class RetrievedDoc:
    """A chunk or parent as stored in the index folder.

    Attributes:
        id: Chunk or parent id (the key in search results).
        title: Title of its document.
        content: Text.
        source: Source label.
        doc_id: The document it was cut from.
        parent_id: For a chunk, the unit parent search returns; for a parent, its own parent (or None).
    """

    id: str
    title: str
    content: str
    source: str
    doc_id: str
    parent_id: str | None


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal-rank fusion: ``sum over rankings of 1 / (k + rank)`` (rank from 1), best first."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, 1):
            fused[doc_id] = fused.get(doc_id, 0.0) + 1.0 / (k + rank)
    return dict(sorted(fused.items(), key=lambda kv: -kv[1]))


class _Store:
    """Id -> row lookup over a source's chunk (or parent) blocks, loaded once."""

    def __init__(self, blocks: list[Path]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = ["id", "doc_id", "parent_id", "title", "content", "source"]
        self.table = pa.concat_tables([pq.read_table(b, columns=cols) for b in blocks]) if blocks else None
        ids = self.table.column("id").to_pylist() if self.table is not None else []
        self.rows = {doc_id: i for i, doc_id in enumerate(ids)}

    def get(self, doc_id: str) -> RetrievedDoc | None:
        i = self.rows.get(doc_id)
        if i is None or self.table is None:
            return None
        r = self.table.slice(i, 1).to_pylist()[0]
        return RetrievedDoc(r["id"], r["title"], r["content"], r["source"], r["doc_id"], r["parent_id"])


class Searcher:
    """Searches the per-source indexes of one index folder.

    Args:
        root: The index folder (``out_dir`` of ``pipelines.index_corpus``).
        query_encoder: ``list[str] -> (n, dim) float32``; by default the manifest's embedder is loaded on
            the first dense search (its query encoder for MedCPT). Tests inject a fake.
        use_gpu: Move flat/IVF indexes to all GPUs faiss sees.

    Raises:
        FileNotFoundError: No ``manifest.json``: the index was never finished (rerun the pipeline).
    """

    def __init__(
        self, root: str | Path, query_encoder: QueryEncoder | None = None, use_gpu: bool = False
    ) -> None:
        self.layout = IndexLayout(root)
        manifest = read_json(self.layout.manifest)
        if manifest is None:
            raise FileNotFoundError(f"{self.layout.manifest} not found: the index is unfinished or absent")
        self.manifest: dict[str, Any] = manifest
        job = manifest["config"]
        self.embedder_cfg: EmbedderConfig = to_dataclass(EmbedderConfig, job["embedder"])
        self.index_cfg: IndexConfig = to_dataclass(IndexConfig, job["index"])
        # A source whose every record was rejected has no index; it cannot be searched.
        self.sources: list[str] = [s for s, e in manifest["sources"].items() if e.get("index")]
        self._encoder = query_encoder
        self._use_gpu = use_gpu
        self._dense: dict[str, DenseIndex] = {}
        self._bm25: dict[str, BM25Index] = {}
        self._ids: dict[str, list[str]] = {}
        self._chunks: dict[str, _Store] = {}
        self._parents: dict[str, _Store] = {}

    # Loading ------------------------------------------------------------------------------------------
    def _source_ids(self, source: str) -> list[str]:
        if source not in self._ids:
            import pyarrow.parquet as pq

            path = self.layout.index_file(source, "ids.parquet")
            self._ids[source] = pq.read_table(path).column("id").to_pylist()
        return self._ids[source]

    def dense(self, source: str) -> DenseIndex:
        if source not in self._dense:
            info = self.manifest["sources"][source]["index"]
            refine = int(info.get("refine_factor", 0))
            self._dense[source] = DenseIndex.load(
                self.layout.index_file(source, "faiss"),
                self._source_ids(source),
                self.embedder_cfg.metric,
                info["kind"],
                info.get("params", {}),
                self.layout.index_file(source, "vectors.npy") if refine else None,
                refine,
                self._use_gpu,
            )
        return self._dense[source]

    def bm25(self, source: str) -> BM25Index:
        if source not in self._bm25:
            path = self.layout.index_file(source, "bm25")
            if not path.exists():
                raise FileNotFoundError(f"{path} not found: the index was built with index.bm25=false")
            self._bm25[source] = BM25Index(path, self._source_ids(source))
        return self._bm25[source]

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self._encoder is None:
            from medagent.retrieval.embedders import Embedder

            self._encoder = Embedder(self.embedder_cfg, load_documents=False).encode_queries
        return np.asarray(self._encoder(texts), dtype=np.float32)

    # Lookup -------------------------------------------------------------------------------------------
    def lookup(self, doc_id: str) -> RetrievedDoc:
        """The chunk or parent with this id, from whichever source holds it.

        Raises:
            KeyError: No source holds the id.
        """
        for source in self.sources:
            for stores, blocks in (
                (self._chunks, self.layout.chunk_blocks),
                (self._parents, self.layout.parent_blocks),
            ):
                if source not in stores:
                    stores[source] = _Store(blocks(source))
                found = stores[source].get(doc_id)
                if found is not None:
                    return found
        raise KeyError(f"no chunk or parent {doc_id!r} in {self.layout.root}")

    def documents(self, ids: Sequence[str]) -> list[RetrievedDoc]:
        return [self.lookup(i) for i in ids]

    # Search -------------------------------------------------------------------------------------------
    def search(
        self,
        queries: dict[str, str],
        top_k: int = 32,
        sources: Sequence[str] | None = None,
        mode: str = "dense",
        return_parents: bool = False,
        depth: int | None = None,
    ) -> Results:
        """BEIR-shaped results: ``query_id -> {doc_id: score}``, up to ``top_k`` per source, best first.

        Args:
            queries: Query id -> text.
            top_k: Results per source (seed A: 32).
            sources: Sources to search (default: all).
            mode: ``dense``, ``bm25`` or ``hybrid``.
            return_parents: Return the parents of the best children instead of the children.
            depth: Candidates per source and retriever before fusion / parent grouping (default:
                ``top_k``, or ``4 * top_k`` for hybrid and parent search).

        Raises:
            ValueError: Unknown mode or source.
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        chosen = list(sources) if sources is not None else self.sources
        unknown = sorted(set(chosen) - set(self.sources))
        if unknown:
            raise ValueError(f"unknown source(s) {unknown}; this index has {self.sources}")
        qids, texts = list(queries), list(queries.values())
        depth = depth or (4 * top_k if mode == "hybrid" or return_parents else top_k)
        qvecs = self._encode(texts) if mode != "bm25" and texts else None
        results: Results = {q: {} for q in qids}
        for source in chosen:
            dense = self.dense(source).search(qvecs, depth) if qvecs is not None else None
            lexical = self.bm25(source).search(texts, depth) if mode != "dense" else None
            for qi, qid in enumerate(qids):
                if mode == "dense" and dense is not None:
                    ranked = dict(dense[qi])
                elif mode == "bm25" and lexical is not None:
                    ranked = dict(lexical[qi])
                else:
                    assert dense is not None and lexical is not None
                    ranked = rrf([[d for d, _ in dense[qi]], [d for d, _ in lexical[qi]]])
                if return_parents:
                    ranked = self._to_parents(source, ranked)
                results[qid].update(list(ranked.items())[:top_k])
        return {q: dict(sorted(r.items(), key=lambda kv: -kv[1])) for q, r in results.items()}

    def _to_parents(self, source: str, ranked: dict[str, float]) -> dict[str, float]:
        if source not in self._chunks:
            self._chunks[source] = _Store(self.layout.chunk_blocks(source))
        parents: dict[str, float] = {}
        for chunk_id, score in ranked.items():  # best first, so the first child seen sets the score
            doc = self._chunks[source].get(chunk_id)
            pid = doc.parent_id if doc is not None and doc.parent_id else chunk_id
            parents.setdefault(pid, score)
        return parents
