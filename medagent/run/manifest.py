"""Run manifests: what produced a run directory (config, code version, packages, data checksums)."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import platform
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from medagent.prompts import prompt_versions

# Packages whose versions change results; recorded in every manifest.
TRACKED_PACKAGES = (
    "medagent",
    "ray",
    "torch",
    "transformers",
    "sentence-transformers",
    "xllamacpp",
    "vllm",
    "faiss-cpu",
    "faiss-gpu",
    "numpy",
    "pyarrow",
    "hydra-core",
    "bert-score",
    "bm25s",
    "networkx",
    "leidenalg",
    "igraph",
)


def git_sha(start: Path | None = None) -> str | None:
    """The commit of the code that ran (``+dirty`` when the tree has changes), or None outside git."""
    cwd = start or Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "")


def package_versions(names: Iterable[str] = TRACKED_PACKAGES) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return out


def file_checksums(paths: Iterable[Path]) -> dict[str, str]:
    out = {}
    for p in paths:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
        out[str(p)] = h.hexdigest()
    return out


def build_manifest(
    config: dict[str, Any],
    data_files: Iterable[Path],
    previous: dict[str, Any] | None = None,
    departures: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A manifest for this invocation; earlier invocations of the same run dir are kept in ``history``.

    ``departures``: where the run's method differs from the paper it reproduces (``medagent.config.recipe``),
    one sentence each; recorded (an empty list: none found) only when given.
    """
    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    invocation = {"started": now, "argv": sys.argv, "git_sha": git_sha(), **extra}
    history = list((previous or {}).get("history", [])) + [invocation]
    return {
        "config": config,
        "git_sha": invocation["git_sha"],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
        # Prompts are package data: their versions (and file checksums) say which wording a run used.
        "prompts": prompt_versions(),
        "data_checksums": file_checksums(data_files),
        "history": history,
        **({} if departures is None else {"departures": list(departures)}),
    }
