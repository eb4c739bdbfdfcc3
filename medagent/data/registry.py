"""Benchmark registry: named loaders yield normalized candidate rows, one shared validator checks them.

Modelled on lm-eval-harness tasks: a loader only knows its source format. It reshapes each record into
the normalized schema (see ``medagent.data.validate``) and yields it as a ``RawRow``; ``load_benchmark``
runs every row through the same validator, so malformed rows are set aside with a stable reason instead
of crashing a run or being silently dropped.

A loader is ``def loader(ctx: LoadContext, **options) -> Iterator[RawRow]``. It checks its options and
resolves its files through ``ctx.file(...)`` (which records them for checksums) *before* returning, then
returns a lazy iterator of rows, so a bad option fails at once and ``limit`` stops reading early.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medagent.data import loaders, paper  # noqa: F401  (the built-in benchmarks register here)
from medagent.data.base import BENCHMARKS, LoadContext, Loader, register_benchmark
from medagent.data.validate import validate_rows

__all__ = ["BENCHMARKS", "BenchmarkData", "LoadContext", "Loader", "list_benchmarks", "load_benchmark",
           "register_benchmark", "resolve_data_root"]  # fmt: skip
from medagent.types import Gold, Question, Rejected

ENV_VAR = "MEDAGENT_DATA"


@dataclass
class BenchmarkData:
    """A loaded benchmark: valid ``(Question, Gold)`` pairs in file order, rejected rows, files read
    (their checksums go into the run manifest, ``medagent.run.manifest.file_checksums``)."""

    name: str
    pairs: list[tuple[Question, Gold]]
    rejected: list[Rejected]
    files: list[Path]

    def __len__(self) -> int:
        return len(self.pairs)


def list_benchmarks() -> list[str]:
    """Return the registered benchmark names, sorted."""
    return BENCHMARKS.names()


def resolve_data_root(explicit: str | Path | None = None) -> Path:
    """Find the data folder: ``explicit`` → env ``MEDAGENT_DATA`` → ``../shared/data`` beside the
    repository root (the folder holding ``pyproject.toml``) → ``shared/data`` inside it.

    Args:
        explicit: A path given by the caller, or ``None``.

    Returns:
        The data root.

    Raises:
        FileNotFoundError: The given/configured folder does not exist, or none was found.
    """
    hint = f"pass data_root=... or set the {ENV_VAR} environment variable to the shared/data folder"
    for given, label in ((explicit, "data_root"), (os.environ.get(ENV_VAR) or None, ENV_VAR)):
        if given is not None:
            path = Path(given).expanduser()
            if not path.is_dir():
                raise FileNotFoundError(f"{label}={given} is not a directory; {hint}")
            return path
    root = next((p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file()), None)
    if root is not None:
        for candidate in (root.parent / "shared" / "data", root / "shared" / "data"):
            if candidate.is_dir():
                return candidate
    raise FileNotFoundError(f"no data root found (no ../shared/data beside the repository); {hint}")


def load_benchmark(
    name: str, /, data_root: str | Path | None = None, limit: int | None = None, **options: Any
) -> BenchmarkData:
    """Load a registered benchmark and validate every row.

    Args:
        name: Registered benchmark name; positional-only, so a loader option may be ``name`` too.
        data_root: Data folder; found with ``resolve_data_root`` when ``None``.
        limit: Keep only the first ``limit`` valid pairs (file order); reading stops there.
        **options: Loader options. ``source_kind="hub"`` loads the same set from the Hugging Face hub
            (needs ``datasets``; only benchmarks in ``loaders.HUB_LOADERS``).

    Returns:
        The valid pairs, the rejected rows and the files read.

    Raises:
        KeyError: Unknown benchmark name (the message lists the registered ones).
        ValueError: Bad ``limit`` or ``source_kind``, or no hub copy of this benchmark.
    """
    loader = BENCHMARKS.get(name)  # KeyError listing the registered benchmarks
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    kind = options.pop("source_kind", "local")
    if kind == "hub":
        from medagent.data.loaders import HUB_LOADERS

        if name not in HUB_LOADERS:
            raise ValueError(f"{name!r} has no hub loader; hub benchmarks: {', '.join(sorted(HUB_LOADERS))}")
        loader = HUB_LOADERS[name]
    elif kind != "local":
        raise ValueError(f"source_kind must be 'local' or 'hub', got {kind!r}")
    root: Path | None
    try:
        root = resolve_data_root(data_root)
    except FileNotFoundError:
        if kind == "local" or data_root is not None:
            raise
        root = None  # hub loads need no local files
    ctx = LoadContext(data_root=root, benchmark=name)
    rows = loader(ctx, **options)  # checks options/files now; ctx.benchmark is final after this call
    pairs: list[tuple[Question, Gold]] = []
    rejected: list[Rejected] = []
    try:
        for result in validate_rows(ctx.benchmark, rows) if limit != 0 else ():
            if isinstance(result, Rejected):
                rejected.append(result)
                continue
            pairs.append(result)
            if limit is not None and len(pairs) >= limit:
                break
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()  # stop a generator early so its open files close now, not at garbage collection
    return BenchmarkData(name=ctx.benchmark, pairs=pairs, rejected=rejected, files=list(ctx.files))
