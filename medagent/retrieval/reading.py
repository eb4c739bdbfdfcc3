"""What a source reader is given and yields, and the registry readers register in.

Kept apart from ``medagent.retrieval.corpus`` (which opens sources and normalizes their records) so that the
reader modules import this one and ``corpus`` imports them: no import cycle, no lazy import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medagent.data.base import under_root
from medagent.registry import Registry


@dataclass(frozen=True)
class RawRecord:
    """What readers yield: a candidate document dict, or ``error`` when the record could not be read.

    Attributes:
        row: Position of the record in its source (1-based), for the rejection report.
        data: Candidate ``{id, title, content, parent_id}`` (or anything, when ``error`` is set).
        error: Why the reader could not turn the record into a candidate.
    """

    row: int | None
    data: Any
    error: str | None = None


@dataclass(frozen=True)
class BulkSpec:
    """Files (or a hub dataset) that Ray Data may read in parallel instead of through the iterator.

    Attributes:
        format: ``jsonl`` (one MedRAG-style record per line) or ``parquet``.
        paths: Files, in reading order.
        hub: ``{"repo_id", "revision"}`` when the files are a hub repository's (for logs).
        filesystem: The fsspec filesystem the paths belong to (the hub's ``HfFileSystem``); ``None`` for
            local paths.
    """

    format: str
    paths: tuple[str, ...] = ()
    hub: dict[str, Any] = field(default_factory=dict)
    filesystem: Any = None


@dataclass
class ReadContext:
    """What a reader gets besides its options: where data lives; it records the files it reads."""

    data_root: Path | None
    source: str
    files: list[Path] = field(default_factory=list)
    bulk: BulkSpec | None = None

    def file(self, path: str | Path) -> Path:
        """Resolve a file (absolute, or relative to the data root), check it exists, record it."""
        resolved = self._resolve(path)
        if not resolved.is_file():
            raise FileNotFoundError(f"source {self.source!r}: file not found: {resolved}")
        if resolved not in self.files:
            self.files.append(resolved)
        return resolved

    def glob(self, path: str | Path, patterns: tuple[str, ...]) -> list[Path]:
        """A file, or the files under a folder matching ``patterns`` (sorted, recursive); recorded."""
        base = self._resolve(path)
        if base.is_file():
            return [self.file(base)]
        if not base.is_dir():
            raise FileNotFoundError(f"source {self.source!r}: no file or folder at {base}")
        found = sorted({p for pat in patterns for p in base.rglob(pat) if p.is_file()})
        if not found:
            raise FileNotFoundError(f"source {self.source!r}: no {'/'.join(patterns)} files under {base}")
        return [self.file(p) for p in found]

    def _resolve(self, path: str | Path) -> Path:
        return under_root(path, self.data_root, f"source {self.source!r}")


Reader = Callable[..., Iterator[RawRecord]]
READERS: Registry[Reader] = Registry("reader")


def register_reader(name: str) -> Callable[[Reader], Reader]:
    """Decorator registering a source reader under ``name`` (another reader under a taken name raises)."""
    return READERS.register(name)
