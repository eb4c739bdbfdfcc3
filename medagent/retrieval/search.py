"""Search a built index: per-source TopK, BEIR-shaped results, document lookup.

``Searcher`` reads ``manifest.json`` of an index folder and loads each source's FAISS index, BM25 index
and text store lazily, on first use. The text stays on disk (``medagent.retrieval.store``: Arrow read
with pread, ids found through sorted hashes), so a replica's RAM is the FAISS codes plus a few bytes per chunk. ``search`` returns ``query_id -> {doc_id: score}`` (higher is
better) holding up to ``top_k`` documents *per source*, as the QA paper retrieves TopK from every source before
reranking. Modes: ``dense``, ``bm25``, ``hybrid`` (reciprocal-rank fusion of the two). With
``return_parents`` the indexed children are searched and their parents returned (the history-taking paper): a parent scores
as its best child.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medagent.api import Doc
from medagent.config import to_dataclass
from medagent.retrieval.config import EmbedderConfig, IndexConfig
from medagent.retrieval.index import BM25Index, DenseIndex
from medagent.retrieval.layout import MANIFEST_FORMAT, IndexLayout, read_json
from medagent.retrieval.store import StoredRow, StoreIds, TextStore

log = logging.getLogger(__name__)

MODES = ("dense", "bm25", "hybrid")
RRF_K = 60  # Cormack et al.'s constant; larger values flatten the contribution of top ranks
QueryEncoder = Callable[[list[str]], np.ndarray]
Results = dict[str, dict[str, float]]


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal-rank fusion: ``sum over rankings of 1 / (k + rank)`` (rank from 1), best first."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, 1):
            fused[doc_id] = fused.get(doc_id, 0.0) + 1.0 / (k + rank)
    return dict(sorted(fused.items(), key=lambda kv: -kv[1]))


class Searcher:
    """Searches the per-source indexes of one index folder.

    Args:
        root: The index folder (``out_dir`` of ``pipelines.index_corpus``).
        query_encoder: ``list[str] -> (n, dim) float32``; by default the manifest's embedder is loaded on
            the first dense search (its query encoder for MedCPT). Tests inject a fake.
        use_gpu: Move flat/IVF indexes to all GPUs faiss sees.

    Raises:
        FileNotFoundError: No ``manifest.json``: the index was never finished (rerun the pipeline); or the
            index predates the on-disk text store (rerun ``pipelines.index_corpus`` on it: it resumes).
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
        fmt = int(manifest.get("format", 1))
        if fmt < MANIFEST_FORMAT:
            # Checked here, not at the first lookup: a replica must fail at start-up, with the remedy.
            raise FileNotFoundError(
                f"{self.layout.root} is an index of format {fmt}, built before the on-disk text store "
                f"(format {MANIFEST_FORMAT}). Rerun `python -m pipelines.index_corpus out_dir="
                f"{self.layout.root}` with the corpus/embedder/index overrides it was built with: it resumes "
                "from the chunks and vectors already there and only rebuilds the index files."
            )
        self._encoder = query_encoder
        self._use_gpu = use_gpu
        self._dense: dict[str, DenseIndex] = {}
        self._bm25: dict[str, BM25Index] = {}
        self._stores: dict[str, TextStore] = {}

    # Loading ------------------------------------------------------------------------------------------
    def store(self, source: str) -> TextStore:
        """The source's text store (chunks in vector order, then parents), read from disk."""
        if source not in self._stores:
            self._stores[source] = TextStore(self.layout.store_stem(source))
        return self._stores[source]

    def _source_ids(self, source: str) -> StoreIds:
        return StoreIds(self.store(source))

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
    def lookup(self, doc_id: str) -> Doc:
        """The chunk or parent with this id, from whichever source holds it.

        Raises:
            KeyError: No source holds the id.
        """
        return self.documents([doc_id])[0]

    def documents(self, ids: Sequence[str], scores: Mapping[str, float] | None = None) -> list[Doc]:
        """The chunks or parents with these ids, in order (one store read per source).

        Args:
            ids: Chunk or parent ids.
            scores: Each id's score (a ``search`` result); 0.0 for every document when not given.

        Raises:
            KeyError: Some ids are in no source (the message names them).
        """
        found: dict[int, Doc] = {}
        todo = list(range(len(ids)))
        for source in self.sources:
            if not todo:
                break
            store = self.store(source)
            rows = store.find([ids[i] for i in todo])
            hits = [(i, int(r)) for i, r in zip(todo, rows, strict=True) if r >= 0]
            for (i, _), row in zip(hits, store.read([r for _, r in hits]), strict=True):
                found[i] = _doc(row, scores[ids[i]] if scores is not None else 0.0)
            todo = [i for i, r in zip(todo, rows, strict=True) if r < 0]
        if todo:
            missing = [ids[i] for i in todo]
            raise KeyError(f"no chunk or parent {missing[:10]!r} in {self.layout.root}")
        return [found[i] for i in range(len(ids))]

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
            top_k: Results per source (the QA paper: 32).
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
        store = self.store(source)
        chunk_ids = list(ranked)
        rows = store.find(chunk_ids)
        known = [int(r) for r in rows if r >= 0]
        parent_of = dict(zip(known, store.column("parent_id", known), strict=True))
        parents: dict[str, float] = {}
        for chunk_id, row in zip(chunk_ids, rows.tolist(), strict=True):  # best first: first child sets it
            pid = parent_of.get(row) if row >= 0 else None
            parents.setdefault(pid or chunk_id, ranked[chunk_id])
        return parents


def _doc(row: StoredRow, score: float) -> Doc:
    """The one place a store row becomes the document every later layer uses."""
    return Doc(row.id, row.source, row.title, row.content, score, row.doc_id, row.parent_id)
