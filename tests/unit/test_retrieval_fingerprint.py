"""What a run records about its index and how it names the sources it searches."""

from __future__ import annotations

import json
from pathlib import Path

from medagent.retrieval.fingerprint import describe_search, index_fingerprint


def test_fingerprint_is_the_manifest_checksum_with_chunks_per_source(tmp_path: Path) -> None:
    assert index_fingerprint(None) is None and index_fingerprint(tmp_path) is None  # unfinished index
    manifest = {"fingerprint": "abc", "sources": {"medquad": {"chunks": 0}, "pubmedqa": {"chunks": 1000}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    fp = index_fingerprint(tmp_path)
    assert fp is not None and fp["fingerprint"] == "abc" and len(fp["manifest_sha256"]) == 64
    assert fp["chunks"] == {"medquad": 0, "pubmedqa": 1000}
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "totals": {}}))
    assert index_fingerprint(tmp_path)["manifest_sha256"] != fp["manifest_sha256"]  # type: ignore[index]


def test_describe_search_names_searched_empty_and_unknown_sources() -> None:
    fp = {"chunks": {"medquad": 0, "pubmedqa": 1000, "bioasq": 1}}
    assert describe_search(fp) == "pubmedqa 1,000 chunks, bioasq 1 chunk, not searched (no chunks): medquad"
    assert describe_search(fp, ["bioasq", "nejm"]) == "bioasq 1 chunk, not in the index: nejm"
    assert describe_search(None) == "no finished index"
