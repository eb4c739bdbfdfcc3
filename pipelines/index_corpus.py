"""Index a corpus: ``python -m pipelines.index_corpus corpus=cpu_default embedder=minilm index=flat out_dir=/abs``.

Three steps, each resumable:
  1. chunk  -- per source, Ray Data read -> ``normalize_batch`` -> ``chunk_batch`` (order preserved); the
               driver commits fixed-size chunk blocks, parents and rejected records. Files a reader declares
               (``ctx.bulk``: MedRAG JSONL/parquet, local or on the hub) are streamed by Ray Data; other
               sources go through their reader's iterator in windows of ``ITER_WINDOW`` records. ``limit``
               keeps the first N accepted documents. Skipped for a source whose ``_SUCCESS.json`` exists
               (and whose data files are unchanged).
  2. embed  -- one Ray Data row per missing shard -> ``map_batches(EmbedWorker, ActorPoolStrategy)``
               (each actor reads and encodes whole shards); the driver writes shard k atomically once all
               its vectors arrived.
  3. index  -- per source, FAISS (flat / IVF-PQ / HNSW) + BM25 from the shards, then ``manifest.json``.
Kill it at any point and rerun the same command: finished blocks and shards are kept, and the index comes
out the same (same vectors, same ids).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from itertools import islice
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from actors.builder import ray_env
from medagent.retrieval.build import (
    ChunkSink,
    ShardCollector,
    SourceChunkStats,
    build_indexes,
    files_present,
    fingerprint,
    job_identity,
    write_index_manifest,
)
from medagent.retrieval.chunking import validate_chunking
from medagent.retrieval.config import IndexJobConfig
from medagent.retrieval.index import validate_index
from medagent.retrieval.layout import (
    MANIFEST_FORMAT,
    IndexLayout,
    parquet_rows,
    read_json,
    write_json_atomic,
    write_text_atomic,
)
from pipelines.common import finished_batches, ray_session, setup_logging

log = logging.getLogger("medagent.index")


def register_index_configs() -> None:
    """Registers the schema that ``conf/index_corpus.yaml`` lists first in its defaults."""
    ConfigStore.instance().store(name="index_schema", node=IndexJobConfig)


def _check_job(cfg: IndexJobConfig, layout: IndexLayout) -> str:
    """Refuse to mix two different jobs in one folder; record this job's identity on first use."""
    identity = job_identity(cfg)
    fp = fingerprint(identity)
    previous = read_json(layout.job)
    if previous is not None and previous.get("fingerprint") != fp:
        changed = sorted(k for k in identity if json.dumps(identity[k], sort_keys=True, default=str)
                         != json.dumps(previous["identity"].get(k), sort_keys=True, default=str))  # fmt: skip
        raise ValueError(
            f"{layout.root} holds an index of a different job (changed: {', '.join(changed)}); "
            "use another out_dir, or delete this one to rebuild"
        )
    if previous is None:
        write_json_atomic(layout.job, {"fingerprint": fp, "identity": identity})
    return fp


# Step 1: read, normalize, chunk -----------------------------------------------------------------------
# Records per Ray Dataset when a source is read through its reader's iterator (XML full text, MedQuAD...):
# the driver holds one window at a time, so a large source does not sit in its memory whole.
ITER_WINDOW = 20_000


def _source_datasets(opened: Any) -> Iterator[Any]:
    """The raw records of one source as Ray Datasets with a JSON ``record`` column, in record order: one
    for a bulk source, one per ``ITER_WINDOW`` records for an iterator source."""
    import ray.data

    from medagent.retrieval.corpus import columns_to_records, record_rows

    bulk = opened.bulk
    if bulk is None:
        rows = record_rows(opened.records)
        while window := list(islice(rows, ITER_WINDOW)):
            yield ray.data.from_items(window)
        return
    # Read lazily and in parallel, local files or the hub's (bulk.filesystem): Ray Data streams blocks with
    # back-pressure, so memory stays bounded. No ``ds.limit``: ``limit`` counts accepted documents, which
    # only ChunkSink knows; the caller stops iterating once the sink is full.
    if bulk.format == "jsonl":
        yield ray.data.read_text(list(bulk.paths), filesystem=bulk.filesystem).map_batches(
            lambda b: {"record": b["text"], "row": [-1] * len(b["text"]), "error": [""] * len(b["text"])}
        )
    elif bulk.format == "parquet":
        ds = ray.data.read_parquet(list(bulk.paths), filesystem=bulk.filesystem)
        yield ds.map_batches(columns_to_records)  # type: ignore[arg-type]  # ray stubs want numpy batches; we ask for dicts
    else:
        raise ValueError(f"source {opened.name}: unknown bulk format {bulk.format!r}")


def chunk_sources(
    cfg: IndexJobConfig, layout: IndexLayout, need_ray: Callable[[], None] = lambda: None
) -> tuple[dict[str, SourceChunkStats], float, int]:
    """Step 1 for every source not yet chunked; returns per-source counts, the seconds spent and the chunks
    made in this run."""
    import shutil

    import pyarrow.parquet as pq
    import ray.data

    from actors.builder import prepare_map_kwargs
    from medagent.retrieval.chunking import chunk_batch
    from medagent.retrieval.corpus import normalize_batch, open_source
    from medagent.run.manifest import file_checksums

    seen: set[str] = set()
    stats: dict[str, SourceChunkStats] = {}
    spent, made = 0.0, 0
    for src in cfg.corpus.sources:
        try:
            opened = open_source(src, cfg.data_root, cfg.limit)
        except FileNotFoundError as exc:
            if not src.optional:
                raise
            # An optional source (e.g. licensed NEJM case reports) the user did not supply: the index is built
            # without it and says so (manifest: missing_sources); supplying it later and rerunning adds it.
            stats[src.name] = SourceChunkStats(src.name, missing=f"optional source not supplied: {exc}")
            log.warning("chunk %s: %s", src.name, stats[src.name].missing)
            continue
        done = read_json(layout.chunks_done(src.name))
        if done is not None:
            current = {str(k): v for k, v in file_checksums(opened.files).items()}
            if current != done["data_files"]:
                raise ValueError(
                    f"source {src.name}: its data files changed since it was chunked in {layout.root}"
                )
            stats[src.name] = SourceChunkStats(**done)
            for block in layout.chunk_blocks(src.name) + layout.parent_blocks(src.name):
                seen.update(pq.read_table(block, columns=["doc_id"]).column("doc_id").to_pylist())
            log.info(
                "chunk %s: already done (%d documents, %d chunks)",
                src.name,
                stats[src.name].documents,
                stats[src.name].chunks,
            )
            continue
        for stale in (layout.chunk_dir(src.name), layout.parent_block(src.name, 0).parent):
            shutil.rmtree(stale, ignore_errors=True)  # an interrupted chunking of this source
        need_ray()
        t = time.perf_counter()
        options = ray.data.DataContext.get_current().execution_options
        # Chunk ordinals (hence shard membership) follow the source's record order.
        options.preserve_order = True
        sink = ChunkSink(layout, src.name, cfg.shard_size, seen, cfg.limit)
        try:
            for raw in _source_datasets(opened):
                ds = raw.map_batches(
                    normalize_batch, fn_kwargs={"source": src.name}, **prepare_map_kwargs(cfg.cluster)
                ).map_batches(
                    chunk_batch,
                    fn_kwargs={"chunking": asdict(cfg.corpus.chunking)},
                    **prepare_map_kwargs(cfg.cluster),
                )
                for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
                    sink.add(batch)
                    if sink.full:  # `limit` accepted documents are in: stop reading the source
                        break
                if sink.full:
                    break
        finally:
            options.preserve_order = False
        stats[src.name] = sink.finish(opened.files)
        spent += time.perf_counter() - t
        made += stats[src.name].chunks
        s = stats[src.name]
        log.info("chunk %s: %d documents -> %d chunks in %d blocks, %d rejected %s (%.1fs)", src.name, s.documents,
                 s.chunks, s.blocks, s.rejected, s.rejected_by_reason, s.seconds)  # fmt: skip
    lines = "".join(
        layout.source_rejected(s).read_text(encoding="utf-8")
        for s in stats
        if layout.source_rejected(s).exists()
    )
    write_text_atomic(layout.rejected, lines)
    return stats, spent, made


# Step 2: embed missing shards ------------------------------------------------------------------------
def embed_missing(
    cfg: IndexJobConfig,
    layout: IndexLayout,
    stats: dict[str, SourceChunkStats],
    on_shard: Callable[[str, int, int], None] | None = None,
    need_ray: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Step 2; returns what was embedded this run and whether every shard now exists.

    Args:
        cfg: The job.
        layout: Its folder.
        stats: Chunking results per source (which blocks exist).
        on_shard: Called with ``(source, shard, rows)`` after each shard is written (benchmarks time it).
        need_ray: Called before Ray is first used (starts it lazily).
    """
    import ray.data

    from actors.builder import embed_worker_constructor_kwargs, embed_worker_map_kwargs
    from actors.embed_worker import EmbedWorker

    expected: dict[tuple[str, int], int] = {}
    todo: list[dict[str, Any]] = []
    total = 0
    for source in stats:
        for k, block in enumerate(layout.chunk_blocks(source)):
            total += 1
            rows = parquet_rows(block)
            shard = layout.shard(source, k)
            if shard.exists() and parquet_rows(shard) == rows:
                continue
            expected[(source, k)] = rows
            todo.append({"source": source, "shard": k, "path": str(block)})
    report = {
        "shards_total": total,
        "shards_embedded": 0,
        "chunks_embedded": 0,
        "seconds": 0.0,
        "complete": not todo,
    }
    if not todo:
        log.info("embed: all %d shards already exist", total)
        return report
    log.info("embed: %d of %d shards to embed (%d chunks)", len(todo), total, sum(expected.values()))
    need_ray()
    t = time.perf_counter()
    # One row per missing shard; EmbedWorker reads and encodes each shard in one call (see its docstring).
    ds = ray.data.from_items(todo, override_num_blocks=len(todo)).map_batches(
        EmbedWorker,
        fn_constructor_kwargs={
            "embedder": asdict(cfg.embedder),
            **embed_worker_constructor_kwargs(cfg.cluster),
        },
        **embed_worker_map_kwargs(cfg.cluster),
    )
    job = read_json(layout.job) or {}
    collector = ShardCollector(layout, expected, precision=job.get("precision"))
    every = max(1, len(todo) // 50)
    for batch in finished_batches(ds, "numpy"):
        done = collector.add(batch)  # type: ignore[arg-type]
        if collector.precision != job.get("precision"):
            # Recorded with the first shard, so a resume on another kind of device is refused (ShardCollector).
            job["precision"] = collector.precision
            write_json_atomic(layout.job, job)
        for source, k in done:
            if on_shard is not None:
                on_shard(source, k, expected[(source, k)])
            n = len(collector.written)
            report["shards_embedded"] = n
            report["chunks_embedded"] += expected[(source, k)]
            if n % every == 0 or n == len(todo):
                rate = report["chunks_embedded"] / (time.perf_counter() - t)
                log.info("embed: shard %s/%05d written (%d/%d, %.1f chunks/s)", source, k, n, len(todo), rate)
        if cfg.stop_after_shards is not None and len(collector.written) >= cfg.stop_after_shards:
            log.warning(
                "embed: stopping after %d new shards (stop_after_shards); rerun to finish",
                len(collector.written),
            )
            break
    report["seconds"] = time.perf_counter() - t
    report["complete"] = not collector.missing()
    return report


# Step 3: per-source indexes + manifest (medagent.retrieval.build) -------------------------------------
def _rate(n: float, seconds: float) -> float:
    return round(n / seconds, 2) if seconds > 0 else 0.0


def run(cfg: IndexJobConfig) -> dict[str, Any]:
    """Runs (or resumes) the job; returns the manifest, or a partial report when stopped early."""
    validate_chunking(cfg.corpus.chunking)
    validate_index(cfg.index, cfg.embedder.dimension)  # fail now, not after hours of embedding
    if not cfg.corpus.sources:
        raise ValueError(f"corpus {cfg.corpus.name!r} has no sources")
    layout = IndexLayout(cfg.out_dir)
    layout.root.mkdir(parents=True, exist_ok=True)
    fp = _check_job(cfg, layout)
    previous = read_json(layout.manifest)
    if (
        previous is not None
        and previous["config"]["index"] == asdict(cfg.index)
        and previous.get("format", 1) >= MANIFEST_FORMAT  # older folders get the on-disk text store
        and files_present(layout, previous)
        and not previous.get("missing_sources")  # an optional source left out may have been supplied since
    ):
        log.info("index in %s is complete; nothing to do", layout.root)
        print_summary(previous)
        return dict(previous)
    layout.manifest.unlink(missing_ok=True)  # the folder is complete again only when a new one is written
    start = time.perf_counter()
    ray_env(cfg.cluster)  # before chunk_sources imports ray.data
    with contextlib.ExitStack() as stack:
        # Ray starts only when a source must be chunked or a shard embedded: re-indexing finished shards
        # (another index kind, a lost index file) needs none.
        started: list[bool] = []

        def need_ray() -> None:
            if not started:
                ray = stack.enter_context(ray_session(cfg.cluster))
                ray.data.DataContext.get_current().enable_progress_bars = cfg.progress
                started.append(True)

        stats, chunk_s, chunked_now = chunk_sources(cfg, layout, need_ray)
        embedded = embed_missing(cfg, layout, stats, need_ray=need_ray)
    if not embedded["complete"]:
        return {"complete": False, "embed": embedded, "out_dir": str(layout.root)}
    t = time.perf_counter()
    sources = build_indexes(cfg, layout, stats)
    index_s = time.perf_counter() - t
    vectors = sum(s["vectors"] for s in sources.values())
    timings = {
        # Chunking may have happened in an earlier invocation: report what each source recorded then.
        "chunk": {
            "seconds": round(sum(s.seconds for s in stats.values()), 2),
            "chunks_per_s": _rate(
                sum(s.chunks for s in stats.values()), sum(s.seconds for s in stats.values())
            ),
            "seconds_this_run": round(chunk_s, 2),
            "chunks_this_run": chunked_now,
        },
        "embed": {**embedded, "chunks_per_s": _rate(embedded["chunks_embedded"], embedded["seconds"])},
        "index": {"seconds": round(index_s, 2), "vectors_per_s": _rate(vectors, index_s)},
        "total_s": round(time.perf_counter() - start, 2),
    }
    manifest = write_index_manifest(cfg, layout, sources, timings, previous, fp)
    print_summary(manifest)
    return manifest


def print_summary(manifest: dict[str, Any]) -> None:
    """The closing table: documents, chunks, vectors per source and throughput per stage."""
    lines = [f"\n{'source':<14}{'documents':>10}{'chunks':>10}{'vectors':>10}{'rejected':>10}  index"]
    for name, s in manifest["sources"].items():
        kind = (
            f"{s['index']['kind']} ({s['index']['bytes_per_vector']:.0f} B/vector)" if s["index"] else "none"
        )
        lines.append(
            f"{name:<14}{s['documents']:>10}{s['chunks']:>10}{s['vectors']:>10}{s['rejected']:>10}  {kind}"
        )
    t = manifest["totals"]
    lines.append(f"{'total':<14}{t['documents']:>10}{t['chunks']:>10}{t['vectors']:>10}{t['rejected']:>10}")
    lines += [
        f"missing (optional, left out): {name}: {why}"
        for name, why in manifest.get("missing_sources", {}).items()
    ]
    tm = manifest["timings"]
    lines.append(
        f"\nchunk {tm['chunk']['seconds']:.1f}s ({tm['chunk']['chunks_per_s']} chunks/s) | embed "
        f"{tm['embed']['seconds']:.1f}s for {tm['embed']['chunks_embedded']} chunks in {tm['embed']['shards_embedded']} "
        f"new shards ({tm['embed']['chunks_per_s']} chunks/s) | index {tm['index']['seconds']:.1f}s "
        f"({tm['index']['vectors_per_s']} vectors/s) | total {tm['total_s']:.1f}s"
    )
    print("\n".join(lines))


register_index_configs()


@hydra.main(config_path="../conf", config_name="index_corpus", version_base="1.3")
def main(cfg: DictConfig) -> None:
    setup_logging()
    job: IndexJobConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    job.out_dir = str(Path(job.out_dir).resolve())
    if job.data_root:
        job.data_root = str(Path(job.data_root).resolve())
    run(job)


if __name__ == "__main__":
    main()
