"""What a run directory records about the index it searched, and how a run names it in its log.

``index_dir`` is a path: the same folder is spelled differently on a laptop and on ``/mnt/shared``, and a
folder can be rebuilt in place from another corpus. So a run does not identify its index by path but by
the checksum of the index's ``manifest.json`` (written last by ``pipelines.index_corpus``, it lists every
index file's checksum, the corpus, the embedder and the chunk counts). The run's manifest holds that
checksum beside the config, and a resume against an index with another checksum is refused as config
drift (``medagent.run.drift``), while the path itself stays free to change.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medagent.retrieval.layout import IndexLayout


def index_fingerprint(index_dir: str | Path | None) -> dict[str, Any] | None:
    """``{manifest_sha256, fingerprint, chunks: {source: n}}`` of a finished index; ``None`` when
    ``index_dir`` is unset or holds no ``manifest.json`` (an unfinished index: the run refuses it later,
    when it deploys the retriever).

    ``fingerprint`` is the index job's own identity (corpus, embedder, chunking: the same across index
    kinds); ``chunks`` makes a drift message say what changed (``chunks.medquad: 0 -> 1500``).
    """
    if not index_dir:
        return None
    path = IndexLayout(index_dir).manifest
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    manifest = json.loads(data)
    return {
        "manifest_sha256": hashlib.sha256(data).hexdigest(),
        "fingerprint": manifest.get("fingerprint"),
        "chunks": {name: int(s.get("chunks", 0)) for name, s in manifest.get("sources", {}).items()},
    }


def describe_search(fp: dict[str, Any] | None, sources: Sequence[str] | None = None) -> str:
    """One line naming the sources a run searches and the chunks each holds, e.g.
    ``medquad 16,407 chunks, pubmedqa 1,000 chunks, bioasq 1,502 chunks``.

    Args:
        fp: ``index_fingerprint`` of the index.
        sources: The agent's ``retrieval_sources`` (``None``: every source of the index).
    """
    if fp is None:
        return "no finished index"
    chunks: dict[str, int] = fp["chunks"]
    searched = [s for s in (sources if sources is not None else chunks) if chunks.get(s, 0) > 0]
    parts = [f"{s} {chunks[s]:,} chunk{'s' if chunks[s] != 1 else ''}" for s in searched]
    skipped = [s for s in chunks if s not in searched and (sources is None or s in sources)]
    unknown = [s for s in sources or () if s not in chunks]
    if skipped:
        parts.append(f"not searched (no chunks): {', '.join(skipped)}")
    if unknown:
        parts.append(f"not in the index: {', '.join(unknown)}")
    return ", ".join(parts) if parts else "no source with chunks"
