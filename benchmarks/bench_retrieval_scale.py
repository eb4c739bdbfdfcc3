"""A retriever replica at PubMed scale: RSS per chunk, document lookup and search latency over >= 2M chunks.

Run: ``python benchmarks/bench_retrieval_scale.py [--chunks 2000000] [--source-index outputs/index/bioasq_eval]``

What it builds (once; ``--out`` is reused when it already holds an index of the same size):
  * chunks: the *real* chunks (and their parent documents) of ``--source-index`` repeated under new ids
    (``<id>~<copy>``) until there are ``--chunks`` of them;
  * vectors: the real embeddings of those chunks, each copy plus Gaussian noise (sigma ``--noise`` per
    dimension) and re-normalized, so copies are near, not equal, neighbours;
  * one source, indexed by the product's own code (``medagent.retrieval.build.build_source_index``) as
    ``conf/index/ivfpq.yaml`` says (96-byte PQ codes, nprobe 256, refine 4 from the on-disk vectors),
    without BM25 (a bm25s index of PubMed is not what this measures).

What it measures, in a fresh process that holds only what a retriever replica holds (the query encoder,
the FAISS index, the text store):
  * RSS per chunk: (RSS after loading the index and running the lookups and searches) - (RSS with the
    encoder loaded, before the index), split into anonymous memory and file-backed pages (what is mapped: the id index);
  * p50 of looking up 32 random documents by id (``Searcher.documents``) and by row (``TextStore.read``);
  * p50 of a search (query encoding + IVF-PQ + refine + the 32 documents), and of the FAISS part alone;
  * the baseline, in the same process: the previous in-RAM store (a pyarrow table of the chunk blocks plus a
    Python dict id -> row, and the Python list of ids the dense index held) over the first ``--baseline``
    chunks, with its RSS per chunk and lookup p50; ratios new ÷ old;
  * the extrapolation to PubMed + Wikipedia (23.9M + 29.9M = 53.8M snippets).
Targets (issue 17): total RSS <= 300 bytes per chunk; lookup p50 <= 5 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PUBMED, WIKIPEDIA = 23_900_000, 29_900_000
SOURCE = "scale"
BLOCK = 65_536  # chunks per block and shard: 31 files for 2M chunks instead of 2,000


def _status() -> dict[str, int]:
    """RssAnon / RssFile / VmRSS of this process in bytes (Linux /proc)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(value.split()[0]) * 1024
    return out


# Build --------------------------------------------------------------------------------------------------
def _real_subset(src: Path) -> tuple[Any, Any, np.ndarray, dict[str, Any]]:
    """Every chunk block of ``src`` whose embedding shard exists (an unfinished index folder will do), the
    parents of those chunks, their vectors, and the embedder config (the manifest's, else job.json's name)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import yaml

    from medagent.retrieval.layout import IndexLayout, read_json, read_shard

    layout = IndexLayout(src)
    manifest = read_json(layout.manifest)
    if manifest is not None:
        embedder = manifest["config"]["embedder"]
    elif read_json(layout.job) is not None:
        embedder = yaml.safe_load((REPO / "conf/embedder/minilm.yaml").read_text())
        if read_json(layout.job)["identity"]["embedder"]["model"][1] != embedder["model"]["pypi"]:
            raise SystemExit(f"{src}: not a MiniLM index; finish it first (its manifest names the embedder)")
    else:
        raise SystemExit(f"{src} holds no index (build one: benchmarks/bench_retrieval_quality.py)")
    chunks, parents, vecs = [], [], []
    for source_dir in sorted((layout.root / "chunks").iterdir()):
        source = source_dir.name
        for k, block in enumerate(layout.chunk_blocks(source)):
            if layout.shard(source, k).exists():
                chunks.append(pq.read_table(block))
                vecs.append(read_shard(layout.shard(source, k))[1])
        if chunks:
            wanted = pa.concat_tables(chunks).column("parent_id").unique()
            for block in layout.parent_blocks(source):
                t = pq.read_table(block)
                parents.append(t.filter(pc.is_in(t.column("id"), wanted)))
    if not chunks:
        raise SystemExit(f"{src} has no embedded shard yet")
    return pa.concat_tables(chunks), pa.concat_tables(parents), np.concatenate(vecs), {"embedder": embedder}


def _suffix(col: Any, copy: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    col = col.cast(pa.string())  # an all-null column (parents' parent_id) is typed null
    return pc.if_else(
        pc.is_null(col), pa.scalar(None, pa.string()), pc.binary_join_element_wise(col, f"~{copy}", "")
    )


def build(out: Path, src: Path, n: int, noise: float, seed: int, ivf: dict[str, int]) -> None:
    import pyarrow as pa
    import yaml

    from medagent.config import to_dataclass
    from medagent.retrieval.build import SourceChunkStats, build_source_index, write_index_manifest
    from medagent.retrieval.config import (
        CorpusConfig,
        EmbedderConfig,
        IndexConfig,
        IndexJobConfig,
        SourceConfig,
    )
    from medagent.retrieval.layout import IndexLayout, write_parquet_atomic, write_shard

    chunks, parents, vecs, manifest = _real_subset(src)
    real = chunks.num_rows
    print(
        f"real subset: {real} chunks, {parents.num_rows} parents from {src}; tiling to {n} chunks", flush=True
    )
    layout = IndexLayout(out)
    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    k = p = written = 0
    buf_t: list[Any] = []
    buf_v: list[np.ndarray] = []

    def emit(final: bool) -> None:
        # Cut what is buffered into BLOCK-row chunk blocks and their embedding shards (block k = shard k).
        nonlocal k, buf_t, buf_v
        table, vec = pa.concat_tables(buf_t), np.concatenate(buf_v)
        while table.num_rows >= BLOCK or (final and table.num_rows):
            size = min(BLOCK, table.num_rows)
            block = table.slice(0, size)
            write_parquet_atomic(block, layout.chunk_block(SOURCE, k))
            write_shard(layout.shard(SOURCE, k), block.column("id").to_pylist(),
                        block.column("ordinal").to_numpy(), vec[:size])  # fmt: skip
            table, vec, k = table.slice(size), vec[size:], k + 1
        buf_t, buf_v = ([table], [vec]) if table.num_rows else ([], [])

    copy = 0
    while written < n:
        take = min(real, n - written)
        cols = {c: chunks.slice(0, take).column(c) for c in chunks.column_names}
        for c in ("id", "doc_id", "parent_id"):
            cols[c] = _suffix(cols[c], copy)
        ordinals = np.arange(written, written + take)
        cols["ordinal"] = pa.array(ordinals, pa.int64())
        cols["shard"] = pa.array(ordinals // BLOCK, pa.int64())
        buf_t.append(pa.table(cols))
        v = vecs[:take] + rng.standard_normal((take, vecs.shape[1])).astype(np.float32) * noise
        buf_v.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        pcols = {c: parents.column(c) for c in parents.column_names}
        for c in ("id", "doc_id", "parent_id"):
            pcols[c] = _suffix(pcols[c], copy)
        write_parquet_atomic(pa.table(pcols), layout.parent_block(SOURCE, p))
        p, written, copy = p + 1, written + take, copy + 1
        if sum(t.num_rows for t in buf_t) >= BLOCK:
            emit(final=False)
    emit(final=True)
    print(
        f"wrote {k} chunk blocks + shards, {p} parent blocks in {time.perf_counter() - t:.0f} s", flush=True
    )
    icfg = to_dataclass(IndexConfig, yaml.safe_load((REPO / "conf/index/ivfpq.yaml").read_text()))
    icfg.bm25, icfg.use_gpu = False, False
    icfg.nlist, icfg.nprobe, icfg.train_size = ivf["nlist"], ivf["nprobe"], ivf["train_size"]
    ecfg = to_dataclass(EmbedderConfig, manifest["embedder"])
    t = time.perf_counter()
    entry = build_source_index(layout, SOURCE, icfg, ecfg.dimension, ecfg.metric, k)
    print(f"indexed in {time.perf_counter() - t:.0f} s: {entry['index']} {entry['timings']}", flush=True)
    job = IndexJobConfig(CorpusConfig("scale", [SourceConfig(SOURCE, "tiled", {"from": str(src)})]), ecfg, icfg,
                         out_dir=str(out), shard_size=BLOCK)  # fmt: skip
    stats = SourceChunkStats(
        SOURCE, documents=parents.num_rows * p, chunks=n, parents=parents.num_rows * p, blocks=k
    )
    write_index_manifest(job, layout, {SOURCE: {**asdict(stats), **entry}}, {}, None, "bench-scale")


# Measure (a fresh process) ------------------------------------------------------------------------------------
def _p50_ms(xs: list[float]) -> float:
    return 1000 * statistics.median(xs)


def measure(out: Path, baseline: int, trials: int, seed: int) -> dict[str, Any]:
    import faiss  # noqa: F401  (its import is part of the constant, not of the index)

    from medagent.retrieval.embedders import Embedder
    from medagent.retrieval.search import Searcher

    probe = Searcher(out)
    encoder = Embedder(probe.embedder_cfg, load_documents=False).encode_queries
    queries = [f"{a} {b}" for a in ("treatment of", "mechanism of", "diagnosis of", "genes linked to")
               for b in ("asthma", "sepsis", "melanoma", "gout", "migraine", "lupus", "anemia", "psoriasis")]  # fmt: skip
    for q in queries:  # the encoder's own buffers belong to the constant, not to the index
        encoder([q + " 0"])
    del probe
    rss0 = _status()
    searcher = Searcher(out, query_encoder=encoder)
    n = int(searcher.manifest["sources"][SOURCE]["vectors"])
    store = searcher.store(SOURCE)
    from medagent.retrieval.store import StoreIds

    ids = StoreIds(store)
    rng = random.Random(seed)
    searcher.search({"w": "warm up"}, top_k=32)  # loads the FAISS index and the store
    rss_loaded = _status()
    lookups, by_row = [], []
    for _ in range(trials):
        rows = [rng.randrange(n) for _ in range(32)]
        want = ids.take(rows)  # the ids, read before the clock starts
        t = time.perf_counter()
        docs = searcher.documents(want)
        lookups.append(time.perf_counter() - t)
        assert [d.id for d in docs] == want
        t = time.perf_counter()
        store.read(rows)
        by_row.append(time.perf_counter() - t)
    search, faiss_only = [], []
    dense = searcher.dense(SOURCE)
    for i in range(trials):
        q = queries[i % len(queries)] + f" {i}"
        t = time.perf_counter()
        ranked = searcher.search({"q": q}, top_k=32)["q"]
        searcher.documents(list(ranked))
        search.append(time.perf_counter() - t)
        qv = encoder([q])
        t = time.perf_counter()
        dense.search(qv, 32)
        faiss_only.append(time.perf_counter() - t)
    rss1 = _status()
    new = {
        "chunks": n,
        "bytes_per_chunk": {k: (rss1[k] - rss0[k]) / n for k in ("VmRSS", "RssAnon", "RssFile")},
        "rss_mb": {"before_index": rss0["VmRSS"] / 2**20, "loaded": rss_loaded["VmRSS"] / 2**20, "after": rss1["VmRSS"] / 2**20},
        "faiss_bytes_per_vector": searcher.manifest["sources"][SOURCE]["index"]["bytes_per_vector"],
        "ivf": {k: searcher.manifest["sources"][SOURCE]["index"]["params"][k] for k in ("nlist", "nprobe")},
        "lookup_p50_ms": _p50_ms(lookups), "lookup_by_row_p50_ms": _p50_ms(by_row),
        "search_p50_ms": _p50_ms(search), "faiss_p50_ms": _p50_ms(faiss_only),
    }  # fmt: skip
    # Baseline: the store the replica used before (medagent/retrieval/search.py:_Store until this change),
    # rebuilt here over the first `baseline` chunks, plus the Python list of ids the dense index held.
    import pyarrow as pa
    import pyarrow.parquet as pq

    before = _status()
    cols = ["id", "doc_id", "parent_id", "title", "content", "source"]
    tables, m = [], 0
    for block in searcher.layout.chunk_blocks(SOURCE):
        if m >= baseline:
            break
        tables.append(pq.read_table(block, columns=cols).slice(0, baseline - m))
        m += tables[-1].num_rows
    table = pa.concat_tables(tables)
    old_ids = table.column("id").to_pylist()
    old_rows = {d: i for i, d in enumerate(old_ids)}
    after = _status()
    old_lookups = []
    for _ in range(trials):
        want = [old_ids[rng.randrange(m)] for _ in range(32)]
        t = time.perf_counter()
        for d in want:
            table.slice(old_rows[d], 1).to_pylist()
        old_lookups.append(time.perf_counter() - t)
    old = {"chunks": m, "bytes_per_chunk": {k: (after[k] - before[k]) / m for k in ("VmRSS", "RssAnon", "RssFile")},
           "lookup_p50_ms": _p50_ms(old_lookups)}  # fmt: skip
    return {"new": new, "old": old}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=2_000_000)
    parser.add_argument("--source-index", type=Path, default=REPO / "outputs/index/bioasq_eval")
    parser.add_argument("--out", type=Path, default=REPO / "outputs/index/scale")
    parser.add_argument("--noise", type=float, default=0.01, help="per-dimension sigma added to each copy")
    # Fewer lists than ivfpq.yaml's ~4·sqrt(n) (5,657 at 2M, capped at 2,564 by its 100k training set):
    # k-means on 2 shared cores would take longer than the rest of the benchmark; nprobe keeps the share
    # of lists visited (1/8) close to the config's (256 of 2,564).
    parser.add_argument("--nlist", type=int, default=1024)
    parser.add_argument("--nprobe", type=int, default=128)
    parser.add_argument("--train-size", type=int, default=50_000)
    parser.add_argument("--baseline", type=int, default=200_000, help="chunks in the old in-RAM store")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    out = args.out.resolve()
    if args.measure_only:
        print(json.dumps(measure(out, args.baseline, args.trials, args.seed)))
        return
    from medagent.retrieval.layout import read_json

    manifest = read_json(out / "manifest.json")
    if manifest is None or manifest["sources"][SOURCE]["vectors"] != args.chunks:
        ivf = {"nlist": args.nlist, "nprobe": args.nprobe, "train_size": args.train_size}
        build(out, args.source_index.resolve(), args.chunks, args.noise, args.seed, ivf)
    else:
        print(f"reusing the index in {out} ({args.chunks} chunks)")
    child = subprocess.run(
        [sys.executable, __file__, "--measure-only", "--out", str(out), "--baseline", str(args.baseline),
         "--trials", str(args.trials), "--seed", str(args.seed)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    r = json.loads(child.stdout.strip().splitlines()[-1])
    new, old = r["new"], r["old"]
    b, ob = new["bytes_per_chunk"], old["bytes_per_chunk"]
    print(
        f"\n{new['chunks']:,} chunks: the real chunks of {args.source_index} repeated under new ids; vectors = "
        f"their real MiniLM embeddings + N(0, {args.noise}^2) noise per copy, re-normalized"
    )
    print(
        f"index: IVF-PQ as conf/index/ivfpq.yaml (96-byte codes, refine 4) but nlist/nprobe {new['ivf']}, "
        f"{new['faiss_bytes_per_vector']:.1f} B/vector serialized; no BM25"
    )
    print(
        f"replica RSS: {new['rss_mb']['before_index']:.0f} MB with the encoder -> {new['rss_mb']['after']:.0f} MB "
        f"after loading the index and {args.trials} lookups + {args.trials} searches"
    )
    print(
        f"RSS per chunk: {b['VmRSS']:.1f} B total = {b['RssAnon']:.1f} anonymous + {b['RssFile']:.1f} file-backed "
        f"(pages of the store, id index and vectors mapped into the process) (target <= 300)"
    )
    print(
        f"lookup of 32 documents by id: p50 {new['lookup_p50_ms']:.2f} ms (target <= 5); by row {new['lookup_by_row_p50_ms']:.2f} ms"
    )
    print(
        f"search (encode + IVF-PQ + refine + 32 documents): p50 {new['search_p50_ms']:.1f} ms; FAISS alone {new['faiss_p50_ms']:.1f} ms"
    )
    print(
        f"\nbaseline, same process: the old in-RAM store over {old['chunks']:,} chunks: {ob['VmRSS']:.0f} B/chunk "
        f"({ob['RssAnon']:.0f} anonymous), lookup p50 {old['lookup_p50_ms']:.2f} ms"
    )
    print(
        f"ratios new ÷ old: RSS per chunk {b['VmRSS'] / ob['VmRSS']:.3f}, lookup p50 {new['lookup_p50_ms'] / old['lookup_p50_ms']:.2f}"
    )
    for name, count in (
        ("PubMed", PUBMED),
        ("Wikipedia", WIKIPEDIA),
        ("PubMed + Wikipedia", PUBMED + WIKIPEDIA),
    ):
        print(
            f"extrapolated {name} ({count / 1e6:.1f}M): {b['VmRSS'] * count / 2**30:.1f} GiB with this store "
            f"(old store: {ob['VmRSS'] * count / 2**30:.0f} GiB for the text alone)"
        )


if __name__ == "__main__":
    main()
