"""A BM25 index built from a stream of chunk texts, in bm25s's own file format, with the driver's memory
bounded by the vocabulary and one batch, not by the corpus.

bm25s builds from the whole tokenized corpus in memory (``BM25.index``: every chunk's token list at once,
plus its own copies), so indexing PubMed + Wikipedia + PMC that way needs the corpus's text in the driver.
Splitting the corpus into shard indexes instead would score each shard with its own IDF and average
length, so scores from different shards would not compare. This builds the one global index bm25s would,
in two passes over the chunk blocks on disk:

1. tokenize each batch (``bm25_tokenize``, the tokenizer queries use), map tokens to ids, count each term's
   document frequency and the documents' lengths; the batch's token ids go to a temporary file;
2. from the frequencies, IDF (Lucene's) and each term's column offsets in the CSC matrix bm25s reads
   (documents x vocabulary, column-major); reading the token ids back batch by batch, score each
   (document, term) pair, gather a window of pairs, sort it by term and write each term's run at its
   column's next offset in the ``.npy`` files with ``pwrite`` (nothing of them is mapped into the driver).

``BM25Index`` loads the result with ``bm25s.BM25.load`` (memory-mapped) as before;
tests/unit/test_retrieval_bm25.py checks that it ranks and scores as bm25s's in-memory build does.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from medagent.retrieval.layout import replace_dir

# bm25s's defaults (BM25(method="lucene", k1=1.5, b=0.75)), which the in-memory build used.
K1, B = 1.5, 0.75
# Postings scored and sorted together before they are written (~40 bytes each while sorted: 40 MB): larger
# windows mean fewer, longer writes per term; the driver's memory is bounded by this, not the corpus.
WINDOW_POSTINGS = 1_000_000


def _tokenize(texts: Sequence[str]) -> list[list[str]]:
    from medagent.retrieval.index import bm25_tokenize

    return bm25_tokenize(texts)


class _Vocabulary:
    """Token -> id in order of first appearance, with document frequencies."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.df = np.zeros(1024, dtype=np.int64)

    def encode(self, docs: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """(token ids of all docs, concatenated; each doc's length); counts each term once per doc."""
        get = self.ids.setdefault
        flat = np.fromiter((get(t, len(self.ids)) for doc in docs for t in doc), dtype=np.int32)
        lens = np.fromiter((len(doc) for doc in docs), dtype=np.int64, count=len(docs))
        if len(self.ids) > len(self.df):
            self.df = np.concatenate(
                [self.df, np.zeros(max(len(self.ids), 2 * len(self.df)) - len(self.df), np.int64)]
            )
        terms, _ = _pairs(flat, lens)
        self.df[: len(self.ids)] += np.bincount(terms, minlength=len(self.ids))
        return flat, lens


def _pairs(flat: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique (term, document-in-batch) pairs sorted by term then document, and each pair's term frequency;
    returned as (terms, docs) with the counts available through ``_pair_counts``."""
    terms, docs, _ = _pair_counts(flat, lens)
    return terms, docs


def _pair_counts(flat: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if flat.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    docs = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    keys, tf = np.unique(flat.astype(np.int64) * len(lens) + docs, return_counts=True)
    return keys // len(lens), keys % len(lens), tf


class _ColumnFile:
    """A ``.npy`` array on disk written by ranges with ``pwrite``: no pages of it are mapped into this
    process (the kernel's page cache holds them), so writing all of it does not grow the resident set."""

    def __init__(self, path: Path, dtype: type, n: int) -> None:
        header = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n,))
        self.offset, self.itemsize = int(header.offset), np.dtype(dtype).itemsize
        del header  # the file is sized (sparse) and has its header; nothing was touched
        self.dtype = dtype
        self.fd = os.open(path, os.O_WRONLY)

    def write(self, start: int, values: np.ndarray) -> None:
        os.pwrite(
            self.fd,
            np.ascontiguousarray(values, dtype=self.dtype).tobytes(),
            self.offset + start * self.itemsize,
        )

    def close(self) -> None:
        os.fsync(self.fd)
        os.close(self.fd)


def build_bm25_streaming(
    batches: Iterable[Sequence[str]], out_dir: Path, tmp_root: Path | None = None
) -> int:
    """Indexes the texts of ``batches`` (in vector order) into ``out_dir`` (replaced when present);
    returns the number of documents. ``tmp_root`` holds the token ids between the passes (default: beside
    ``out_dir``)."""
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    vocab = _Vocabulary()
    with tempfile.TemporaryDirectory(dir=tmp_root or out_dir.parent) as spill:
        parts: list[tuple[Path, int]] = []
        n_docs, total_len = 0, 0
        for i, texts in enumerate(batches):
            flat, lens = vocab.encode(_tokenize(texts))
            path = Path(spill) / f"batch-{i:06d}.npz"
            np.savez(path, flat=flat, lens=lens)
            parts.append((path, len(lens)))
            n_docs += len(lens)
            total_len += int(lens.sum())
        _write_matrix(vocab, parts, n_docs, total_len, tmp)
    replace_dir(tmp, out_dir)
    return n_docs


def _write_matrix(
    vocab: _Vocabulary, parts: list[tuple[Path, int]], n_docs: int, total_len: int, out: Path
) -> None:
    n_vocab = len(vocab.ids)
    df = vocab.df[:n_vocab]
    avg_len = total_len / n_docs if n_docs else 0.0
    # Lucene's IDF, as bm25s computes it (float32 like its arrays).
    idf = np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    nnz = int(indptr[-1])
    data = _ColumnFile(out / "data.csc.index.npy", np.float32, nnz)
    indices = _ColumnFile(out / "indices.csc.index.npy", np.int32, nnz)
    cursor = indptr[:-1].copy()
    window: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    held = 0

    def flush() -> None:
        # The window's postings, term-major (stable: documents stay ascending within a term), go to their
        # columns' next offsets: one contiguous range per term.
        terms = np.concatenate([w[0] for w in window])
        order = np.argsort(terms, kind="stable")
        terms = terms[order]
        docs = np.concatenate([w[1] for w in window])[order]
        scores = np.concatenate([w[2] for w in window])[order]
        uniq, first, counts = np.unique(terms, return_index=True, return_counts=True)
        for t, a, c in zip(uniq.tolist(), first.tolist(), counts.tolist(), strict=True):
            data.write(int(cursor[t]), scores[a : a + c])
            indices.write(int(cursor[t]), docs[a : a + c])
            cursor[t] += c
        window.clear()

    first_doc = 0
    for path, n in parts:
        with np.load(path) as z:
            flat, lens = z["flat"], z["lens"]
        terms, docs, tf = _pair_counts(flat, lens)
        if terms.size:
            dl = lens[docs].astype(np.float32)
            tf32 = tf.astype(np.float32)
            # Lucene as bm25s computes it: tf / (tf + k1 (1 - b + b dl / avgdl)), without the (k1 + 1) factor.
            score = idf[terms] * tf32 / (tf32 + K1 * (1 - B + B * dl / np.float32(avg_len)))
            window.append((terms, (docs + first_doc).astype(np.int32), score.astype(np.float32)))
            held += terms.size
        first_doc += n
        if held >= WINDOW_POSTINGS:
            flush()
            held = 0
    if window:
        flush()
    data.close()
    indices.close()
    if not np.array_equal(cursor, indptr[1:]):
        raise ValueError("BM25 build: the second pass wrote other postings than the first counted")
    np.save(out / "indptr.csc.index.npy", indptr)
    # bm25s adds the empty token after the matrix's columns: a query with no known token maps to it.
    vocab_dict = {**vocab.ids, "": n_vocab} if "" not in vocab.ids else dict(vocab.ids)
    (out / "vocab.index.json").write_text(json.dumps(vocab_dict, ensure_ascii=False), encoding="utf-8")
    params = {"k1": K1, "b": B, "delta": 0.5, "method": "lucene", "idf_method": "lucene", "dtype": "float32",
              "int_dtype": "int32", "num_docs": n_docs, "backend": "numpy"}  # fmt: skip
    (out / "params.index.json").write_text(json.dumps(params, indent=4), encoding="utf-8")
