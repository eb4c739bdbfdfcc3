"""Typed configuration of the indexing job and the retrieval library (the ``conf/corpus``, ``conf/embedder``
and ``conf/index`` groups, composed by ``conf/index_corpus.yaml``).

Kept beside the retrieval code rather than in ``medagent.config`` so that the schema of an index lives with
the code that reads it; ``ClusterConfig`` (resources) still comes from ``medagent.config``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from medagent.config import ClusterConfig, ModelConfig
from medagent.config.choices import ChunkingMode, HnswStorage, IndexKind, Metric, Pooling, coerce_choices


@dataclass
class SourceConfig:
    """One source of a corpus.

    Attributes:
        name: Label carried by every document and chunk of this source (``source`` column); one FAISS and
            one BM25 index are built per name.
        reader: Registered reader (``medagent.retrieval.corpus.list_readers()``).
        options: Reader options (paths relative to the data root, hub repository, ...).
        optional: A source the user may not have (NEJM's case reports need a licence): when its files are
            missing the index is built without it, and its manifest names it under ``missing_sources``;
            a required source's missing files stop the job.
    """

    name: str = MISSING
    reader: str = MISSING
    options: dict[str, Any] = field(default_factory=dict)
    optional: bool = False


@dataclass
class ChunkingConfig:
    """How documents are cut. Sizes count whitespace-separated words, not model tokens, so chunk ids and
    the BM25 index do not change with the embedder.

    Attributes:
        mode: ``plain`` (chunks of ``size`` words; a chunk's parent is its document) or ``parent_child``
            (the history-taking paper: parents of ``parent_size`` words are cut into children of ``size`` words; children are
            indexed, each keeps its parent's id).
        size: Words per indexed chunk (the child in ``parent_child`` mode).
        overlap: Words shared by consecutive chunks.
        parent_size: Words per parent (``parent_child`` only).
        parent_overlap: Words shared by consecutive parents (``parent_child`` only).
        min_words: A trailing window shorter than this is merged into the previous chunk.
    """

    mode: ChunkingMode = ChunkingMode.plain
    size: int = 128
    overlap: int = 16
    parent_size: int = 512
    parent_overlap: int = 0
    min_words: int = 16

    def __post_init__(self) -> None:
        coerce_choices(self, "corpus.chunking")


@dataclass
class CorpusConfig:
    """A named list of sources and how they are chunked."""

    name: str = MISSING
    sources: list[SourceConfig] = field(default_factory=list)
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)


@dataclass
class EmbedderConfig:
    """A sentence-transformers embedder and how its vectors are compared.

    Attributes:
        name: Config name (``conf/embedder/<name>.yaml``).
        model: Document (article) encoder.
        query_model: Separate query encoder (MedCPT); ``None`` encodes queries with ``model``.
        dimension: Expected vector size; checked against the loaded model.
        normalize: L2-normalize vectors (cosine models); SPECTER keeps raw vectors and L2 as in the QA paper.
        metric: ``l2`` (FAISS L2 distance, score = -distance) or ``ip`` (inner product).
        pooling: Force ``cls`` or ``mean`` pooling for a plain transformers checkpoint; ``None`` keeps the
            model's own sentence-transformers configuration.
        max_seq_length: Document truncation in model tokens; ``None`` keeps the model's.
        query_max_seq_length: Query truncation; ``None`` keeps the model's.
        title_sep: Joins title and content into the text that is embedded (SPECTER: ``[SEP]``).
        query_prefix: Prepended to every query (instruction-tuned models).
        batch_size: Sentences per forward pass.
        device: ``cpu``, ``cuda``, ... ; ``None`` picks CUDA when available.
        model_kwargs: Passed through to ``SentenceTransformer`` (e.g. ``trust_remote_code``).
        half_on_gpu: Run the encoders in fp16 on a CUDA device (CPUs keep fp32, where fp16 is slow):
            half the memory and about twice the throughput of fp32 on tensor cores, the rate the GPU
            notes plan at; the vectors are stored as float32 either way.
    """

    name: str = "minilm"
    model: ModelConfig = field(default_factory=ModelConfig)
    query_model: ModelConfig | None = None
    dimension: int = 384
    normalize: bool = True
    metric: Metric = Metric.l2
    pooling: Pooling | None = None
    max_seq_length: int | None = None
    query_max_seq_length: int | None = None
    title_sep: str = ". "
    query_prefix: str = ""
    batch_size: int = 64
    device: str | None = None
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    half_on_gpu: bool = True

    def __post_init__(self) -> None:
        coerce_choices(self, "embedder")


@dataclass
class IndexConfig:
    """One FAISS index per source, plus BM25.

    Attributes:
        kind: ``flat`` (exact, the QA paper), ``ivfpq`` or ``hnsw``.
        nlist: IVF lists; ``None`` picks ~4·sqrt(n) (bounded by the training set).
        pq_m: Product-quantizer sub-vectors, i.e. bytes per code at 8 bits (``ivfpq``; ``hnsw`` with
            ``hnsw_storage=pq``).
        pq_nbits: Bits per sub-vector code.
        nprobe: IVF lists visited per query.
        hnsw_m: HNSW neighbours per node.
        ef_construction: HNSW build beam.
        ef_search: HNSW search beam.
        hnsw_storage: Vectors stored in the HNSW graph: ``flat``, ``sq8`` or ``pq``.
        refine_factor: When > 0, fetch ``top_k * refine_factor`` candidates and re-rank them with exact
            distances read from ``vectors.npy`` on disk (read by row with pread, not held in RAM).
        train_size: Most vectors used to train IVF/PQ (sampled with ``seed``).
        use_gpu: Build and search flat/IVF indexes on all GPUs when faiss sees any.
        bm25: Also build a BM25 index per source (needed by ``mode=bm25|hybrid``).
        seed: Seed of the training sample and of FAISS k-means.
    """

    kind: IndexKind = IndexKind.flat
    nlist: int | None = None
    pq_m: int = 96
    pq_nbits: int = 8
    nprobe: int = 256
    hnsw_m: int = 8
    ef_construction: int = 200
    ef_search: int = 512
    hnsw_storage: HnswStorage = HnswStorage.flat
    refine_factor: int = 0
    train_size: int = 100_000
    use_gpu: bool = True
    bm25: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        coerce_choices(self, "index")


@dataclass
class IndexJobConfig:
    """What ``pipelines/index_corpus.py`` composes.

    Attributes:
        out_dir: Folder of the index (made absolute at the driver); rerun with the same one to resume.
        data_root: Data folder for relative source paths (default: ``$MEDAGENT_DATA``, else ../shared/data).
        shard_size: Chunks per embedding shard. Shard k holds chunks ``[k*shard_size, (k+1)*shard_size)``
            of its source, so a rerun knows which shards are done.
        limit: Keep the first this-many *accepted* documents of each source (trial runs, tests, the demo);
            rejected records are still read, set aside and counted, but do not use up the limit.
        stop_after_shards: Stop after writing this many new shards, leaving the job unfinished (tests of
            resumption; ``None`` runs to the end).
        progress: Ray Data progress bars.
    """

    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    out_dir: str = MISSING
    data_root: str | None = None
    shard_size: int = 1024
    limit: int | None = None
    stop_after_shards: int | None = None
    progress: bool = True
