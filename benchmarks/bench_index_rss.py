"""The indexing driver's peak memory at two corpus sizes: does it grow with the corpus?

    python benchmarks/bench_index_rss.py --sizes 500000 2000000

For each size, synthetic chunks go through the driver's real steps of ``pipelines.index_corpus``: the chunk
stage's output into ``ChunkSink`` (chunk blocks on disk), embedded rows into ``ShardCollector`` (shards),
then the per-source index build. What the Ray workers do (reading, chunking, the embedding model) is not
the driver's and is stood in for: the texts are drawn from a fixed Zipf vocabulary of ``--vocab`` words,
and the "embeddings" are random ``--dim``-dimensional vectors (a tiny dimension keeps the FAISS flat
index, which is 4 x dim bytes per chunk by design and held by every retriever replica anyway, out of the
comparison). Each measured step runs in a fresh process whose peak RSS (``ru_maxrss``) is read when it ends,
minus its RSS after imports:

- ``bm25 streamed``: the build's BM25 step (``medagent.retrieval.bm25``, one chunk block at a time);
- ``bm25 in memory``: the step as it was (every chunk's text collected, then ``bm25s.BM25.index``), the
  baseline, run up to ``--baseline-max`` chunks;
- ``source index``: all of ``build_source_index`` (FAISS, text store, streamed BM25).

Flat means the 2M/0.5M ratio of the streamed step stays near 1 while the baseline's grows with the corpus.
With real text the vocabulary keeps growing (Heaps' law, about sqrt(N)), and the driver holds it (a dict
entry per distinct token) and, in the dense part, one id string and 4 x dim bytes per chunk.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SOURCE = "synthetic"


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def prepare(out: Path, n: int, words: int, vocab: int, dim: int, shard: int, seed: int) -> None:
    """Chunk blocks and shards of ``n`` synthetic chunks, written by the driver's own sinks."""
    from medagent.retrieval.build import ChunkSink, ShardCollector
    from medagent.retrieval.layout import IndexLayout

    rng = np.random.default_rng(seed)
    lexicon = np.array([f"w{i}" for i in range(vocab)], dtype=object)
    layout = IndexLayout(out)
    sink = ChunkSink(layout, SOURCE, shard, set())
    for start in range(0, n, shard):
        m = min(shard, n - start)
        ids = [f"c{start + i}" for i in range(m)]
        tokens = lexicon[np.minimum(rng.zipf(1.3, size=(m, words)) - 1, vocab - 1)]
        texts = [" ".join(row) for row in tokens]
        sink.add({"kind": ["chunk"] * m, "id": ids, "doc_id": ids, "parent_id": [None] * m, "title": [""] * m,
                  "content": texts, "source": [SOURCE] * m, "n": [0] * m, "row": list(range(start, start + m)),
                  "error": [None] * m, "raw": [""] * m})  # fmt: skip
    stats = sink.finish()
    expected = {(SOURCE, k): min(shard, n - k * shard) for k in range(stats.blocks)}
    collector = ShardCollector(layout, expected)
    for k in range(stats.blocks):
        m = expected[(SOURCE, k)]
        collector.add({"id": [f"c{k * shard + i}" for i in range(m)], "source": [SOURCE] * m, "shard": [k] * m,
                       "ordinal": list(range(k * shard, k * shard + m)),
                       "embedding": rng.standard_normal((m, dim)).astype(np.float32)})  # fmt: skip
    (out / "blocks.json").write_text(json.dumps({"blocks": stats.blocks, "chunks": stats.chunks}))


def measure(step: str, out: Path, dim: int) -> dict[str, Any]:
    """Runs one step in this (fresh) process; its peak RSS above the RSS after imports."""
    import bm25s  # noqa: F401  (imported by every step: its import is not the step's memory)
    import pyarrow.parquet as pq

    from medagent.retrieval.bm25 import build_bm25_streaming
    from medagent.retrieval.build import _block_texts, build_source_index
    from medagent.retrieval.config import IndexConfig
    from medagent.retrieval.index import build_bm25
    from medagent.retrieval.layout import IndexLayout

    layout = IndexLayout(out)
    blocks = json.loads((out / "blocks.json").read_text())["blocks"]
    base = _rss_mb()
    t = time.perf_counter()
    if step == "bm25_streamed":
        build_bm25_streaming(_block_texts(layout, SOURCE), out / "bm25-streamed")
    elif step == "bm25_in_memory":
        texts: list[str] = []
        for block in layout.chunk_blocks(SOURCE):
            table = pq.read_table(block, columns=["title", "content"])
            texts.extend(
                f"{a} {b}".strip()
                for a, b in zip(*(table.column(c).to_pylist() for c in ("title", "content")), strict=True)
            )
        build_bm25(texts, out / "bm25-in-memory")
    elif step == "source_index":
        build_source_index(layout, SOURCE, IndexConfig(kind="flat", use_gpu=False), dim, "l2", blocks)  # type: ignore[arg-type]
    else:
        raise ValueError(step)
    return {"step": step, "seconds": round(time.perf_counter() - t, 1), "base_mb": round(base, 1),
            "peak_mb": round(_peak_mb(), 1), "added_mb": round(_peak_mb() - base, 1)}  # fmt: skip


def _child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, *args], cwd=REPO, capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[500_000, 2_000_000])
    p.add_argument("--words", type=int, default=40, help="words per synthetic chunk")
    p.add_argument("--vocab", type=int, default=50_000, help="distinct words the chunks are drawn from")
    p.add_argument("--dim", type=int, default=8, help="dimension of the stand-in vectors")
    p.add_argument("--shard", type=int, default=1024, help="chunks per block (index_corpus's shard_size)")
    p.add_argument(
        "--baseline-max", type=int, default=2_000_000, help="largest size the in-memory baseline runs at"
    )
    p.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    p.add_argument("--child", nargs=2, metavar=("STEP", "DIR"), help=argparse.SUPPRESS)
    p.add_argument("--prepare", nargs=2, metavar=("N", "DIR"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.prepare:
        prepare(Path(a.prepare[1]), int(a.prepare[0]), a.words, a.vocab, a.dim, a.shard, seed=0)
        print(json.dumps({"prepared": int(a.prepare[0])}))
        return
    if a.child:
        print(json.dumps(measure(a.child[0], Path(a.child[1]), a.dim)))
        return
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=a.work) as tmp:
        for n in a.sizes:
            folder = Path(tmp) / f"n{n}"
            common = [
                "--words",
                str(a.words),
                "--vocab",
                str(a.vocab),
                "--dim",
                str(a.dim),
                "--shard",
                str(a.shard),
            ]
            t = time.perf_counter()
            _child("--prepare", str(n), str(folder), *common)
            print(f"{n:>9} chunks prepared in {time.perf_counter() - t:.0f}s", flush=True)
            steps = ["bm25_streamed", "source_index"] + (["bm25_in_memory"] if n <= a.baseline_max else [])
            for step in steps:
                r = {"chunks": n, **_child("--child", step, str(folder), *common)}
                rows.append(r)
                print(f"{n:>9} {step:<15} peak {r['peak_mb']:>8.1f} MB (+{r['added_mb']:.1f} over imports) "
                      f"in {r['seconds']:.0f}s", flush=True)  # fmt: skip
    print(
        f"\n{'step':<15}" + "".join(f"{n:>12}" for n in a.sizes) + f"{'ratio':>9}   (MB added over imports)"
    )
    for step in ("bm25_streamed", "source_index", "bm25_in_memory"):
        got = {r["chunks"]: r["added_mb"] for r in rows if r["step"] == step}
        if not got:
            continue
        cells = "".join(f"{got[n]:>12.1f}" if n in got else f"{'-':>12}" for n in a.sizes)
        lo, hi = min(got), max(got)
        ratio = f"{got[hi] / got[lo]:>9.2f}" if len(got) > 1 and got[lo] > 0 else f"{'-':>9}"
        print(f"{step:<15}{cells}{ratio}")
    print(f"(ratio: largest / smallest size; sizes x{max(a.sizes) / min(a.sizes):.1f})")


if __name__ == "__main__":
    main()
