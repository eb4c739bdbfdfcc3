"""MedRAG-style ``{id, title, content}`` sources: local files, the Hugging Face hub corpora, and NEJM case
reports that a user supplies.

Every reader here reads its files one at a time and each file lazily (JSONL line by line, parquet one row
group at a time), so memory stays bounded by one batch whatever the corpus size: MedRAG's PubMed is ~70 GB
of JSONL and is never downloaded whole or converted to Arrow before the first chunk. The same files are
also declared as ``ctx.bulk`` so that ``pipelines.index_corpus`` reads them with Ray Data in parallel
(streaming, with back-pressure) instead of through the iterator; the records are the same either way.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from medagent.retrieval.reading import BulkSpec, RawRecord, ReadContext, register_reader

# MedRAG's hub corpora keep their snippets as JSONL under chunk/ (MedRAG/pubmed: chunk/pubmed23n0001.jsonl
# ... one file per PubMed baseline file; textbooks and wikipedia alike).
HUB_FILES = ("chunk/*.jsonl",)


def iter_jsonl_lines(fh: IO[bytes], start_row: int = 0) -> Iterator[RawRecord]:
    """One record per non-blank line of an open binary file; a line that is not UTF-8 or not JSON
    becomes a rejected record. Rows count lines from ``start_row + 1``."""
    for line_no, line in enumerate(fh, start_row + 1):
        if line_no == start_row + 1 and line.startswith(codecs.BOM_UTF8):
            line = line[len(codecs.BOM_UTF8) :]
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield RawRecord(line_no, line[:200].decode("utf-8", "replace"), f"not UTF-8 (byte {exc.start})")
            continue
        try:
            yield RawRecord(line_no, json.loads(text))
        except json.JSONDecodeError as exc:
            yield RawRecord(line_no, text, f"invalid JSON ({exc.msg}, column {exc.colno})")


def iter_jsonl(path: Path, start_row: int = 0) -> Iterator[RawRecord]:
    """``iter_jsonl_lines`` over a local file."""
    with path.open("rb") as fh:
        yield from iter_jsonl_lines(fh, start_row)


def iter_files(paths: Iterable[str], fmt: str | None, fs: Any = None) -> Iterator[RawRecord]:
    """Records of JSONL or parquet files in order, one file open at a time; ``fmt`` ``None`` goes by each
    file's suffix. ``fs`` is an fsspec filesystem (the hub's) or ``None`` for local paths. Rows run on
    across files, so each is unique in the source."""
    row = 0
    for path in paths:
        kind = fmt or ("parquet" if path.endswith(".parquet") else "jsonl")
        opener = fs.open(path, "rb") if fs is not None else open(path, "rb")  # noqa: SIM115 (closed below)
        with opener as fh:
            if kind == "jsonl":
                for rec in iter_jsonl_lines(fh, row):
                    row = rec.row or row
                    yield rec
                continue
            import pyarrow.parquet as pq

            # One row group at a time: a parquet file of millions of rows is never read whole.
            for batch in pq.ParquetFile(fh).iter_batches():
                for rec in batch.to_pylist():
                    row += 1
                    yield RawRecord(row, rec)


@register_reader("medrag_files")
def read_medrag_files(ctx: ReadContext, path: str, format: str | None = None) -> Iterator[RawRecord]:
    """MedRAG-style ``{id, title, content}`` records from JSONL or parquet files (a file or a folder).

    MedRAG's own ``contents`` (title + content, for BM25) is used only when ``content`` is absent.

    Args:
        path: A file, or a folder searched recursively for ``*.jsonl`` / ``*.parquet``.
        format: ``jsonl`` or ``parquet``; inferred from the file names when ``None``.
    """
    patterns = {"jsonl": ("*.jsonl", "*.json"), "parquet": ("*.parquet",), None: ("*.jsonl", "*.parquet")}
    if format not in patterns:
        raise ValueError(f"medrag_files: format must be jsonl or parquet, got {format!r}")
    files = ctx.glob(path, patterns[format])
    fmt = format or ("parquet" if files[0].suffix == ".parquet" else "jsonl")
    ctx.bulk = BulkSpec(fmt, tuple(str(f) for f in files))
    return iter_files([str(f) for f in files], fmt)


def hub_filesystem(url: str) -> tuple[Any, str]:
    """``(fsspec filesystem, root path)`` for an fsspec URL: ``hf://datasets/<repo>@<rev>`` (the hub, via
    ``huggingface_hub``'s ``HfFileSystem``) or a local folder / ``file://`` URL holding a copy of the repo."""
    import fsspec

    if url.startswith("hf://"):
        try:
            import huggingface_hub  # noqa: F401  (registers the hf:// protocol with fsspec)
        except ImportError as exc:  # a clear hint beats a bare "protocol not known" deep in a pipeline
            raise ImportError("medrag_hub needs the hub extra: pip install -e '.[hub]'") from exc
    fs, root = fsspec.core.url_to_fs(url)
    return fs, str(root).rstrip("/")


@register_reader("medrag_hub")
def read_medrag_hub(
    ctx: ReadContext,
    repo_id: str,
    revision: str = "main",
    files: Iterable[str] = HUB_FILES,
    url: str | None = None,
) -> Iterator[RawRecord]:
    """A MedRAG corpus on the Hugging Face hub (``MedRAG/pubmed``, ``MedRAG/textbooks``,
    ``MedRAG/wikipedia``), read file by file over HTTP (no full download, no Arrow copy).

    The repository's files are listed now (so a wrong name fails before Ray starts); they are read
    lazily, and ``ctx.bulk`` hands the same list to Ray Data. Pin ``revision`` to a commit for an index
    that can be rebuilt identically: the hub's ``main`` may move.

    MedRAG does not host StatPearls snippets (licence): build them with MedRAG's script and read them with
    ``medrag_files`` (or read the StatPearls ``.nxml`` files with ``bookshelf``).

    Args:
        repo_id: The dataset repository.
        revision: Branch, tag or commit.
        files: Glob patterns of the data files inside the repository (JSONL or parquet, not both).
        url: The repository's root as an fsspec URL; default ``hf://datasets/<repo_id>@<revision>``. A local
            copy (``huggingface-cli download --repo-type dataset <repo> --local-dir DIR``) works with
            ``url=DIR``.
    """
    fs, root = hub_filesystem(url or f"hf://datasets/{repo_id}@{revision}")
    found = sorted({p for pattern in files for p in fs.glob(f"{root}/{pattern}")})
    if not found:
        raise FileNotFoundError(
            f"source {ctx.source!r}: no {'/'.join(files)} files in {url or repo_id} (revision {revision})"
        )
    kinds = {"parquet" if p.endswith(".parquet") else "jsonl" for p in found}
    if len(kinds) > 1:
        raise ValueError(
            f"source {ctx.source!r}: {repo_id} mixes JSONL and parquet files; pick one in files="
        )
    fmt = kinds.pop()
    ctx.bulk = BulkSpec(fmt, tuple(found), hub={"repo_id": repo_id, "revision": revision}, filesystem=fs)
    return iter_files(found, fmt, fs)


@register_reader("nejm_case_reports")
def read_nejm_case_reports(ctx: ReadContext, path: str) -> Iterator[RawRecord]:
    """NEJM case reports (Case Records of the Massachusetts General Hospital, Clinical Problem-Solving,
    ...) that the user supplies: NEJM's text is licensed, so nothing here downloads it.

    Put one report (or one section of one) per record in MedRAG's schema, ``{"id", "title", "content"}``,
    in JSONL or parquet files (see ``docs/CLUSTER.md``, "The QA paper's six sources"). Ids are prefixed
    ``nejm:`` so they cannot collide with another source's (``NEJMcpc2300001`` -> ``nejm:NEJMcpc2300001``);
    an optional ``parent_id`` (the report a section belongs to) is prefixed the same way.

    Args:
        path: A file, or a folder searched recursively for ``*.jsonl`` / ``*.parquet``.
    """
    files = ctx.glob(path, ("*.jsonl", "*.parquet"))

    def records() -> Iterator[RawRecord]:
        # No bulk path: the prefix is added here, and a few thousand reports read fast enough in one process.
        for rec in iter_files([str(f) for f in files], None):
            data, doc_id = rec.data, rec.data.get("id") if isinstance(rec.data, dict) else None
            if rec.error or isinstance(doc_id, bool) or not isinstance(doc_id, str | int) or doc_id == "":
                yield rec  # the normalizer rejects it with its reason
                continue
            parent = data.get("parent_id")
            parent_id = f"nejm:{parent}" if isinstance(parent, str) and parent else None
            yield RawRecord(rec.row, {**data, "id": f"nejm:{doc_id}", "parent_id": parent_id})

    return records()
