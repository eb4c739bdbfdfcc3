"""What a benchmark loader is given, and the registry loaders register in.

Kept apart from ``medagent.data.registry`` (which loads and validates) so that ``loaders`` imports this
module and ``registry`` imports ``loaders``: no import cycle, no lazy import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from medagent.data.validate import RawRow
from medagent.registry import Registry


def under_root(path: str | Path, data_root: Path | None, what: str) -> Path:
    """``path`` as given when absolute, else under ``data_root`` (``what`` names the caller in the error)."""
    resolved = Path(path).expanduser()
    if not resolved.is_absolute():
        if data_root is None:
            raise FileNotFoundError(f"{what}: no data root to resolve {path}")
        resolved = data_root / resolved
    return resolved


@dataclass
class LoadContext:
    """What a loader gets besides its options.

    Attributes:
        data_root: Folder holding the data sets; ``None`` only for a hub load on a machine without one.
        benchmark: Name given to the rows; a loader may change it before returning (``jsonl`` does).
        files: Data files read, in order.
    """

    data_root: Path | None
    benchmark: str
    files: list[Path] = field(default_factory=list)

    def file(self, path: str | Path) -> Path:
        """Resolve a data file (absolute, or relative to the data root), check it exists, record it."""
        resolved = under_root(path, self.data_root, self.benchmark)
        if not resolved.is_file():
            raise FileNotFoundError(f"{self.benchmark}: data file not found: {resolved}")
        if resolved not in self.files:
            self.files.append(resolved)
        return resolved


Loader = Callable[..., Iterator[RawRow]]
BENCHMARKS: Registry[Loader] = Registry("benchmark")


def register_benchmark(name: str) -> Callable[[Loader], Loader]:
    """Decorator registering a loader under ``name``; returns the loader unchanged.

    Raises:
        ValueError: The name is already taken by another loader.
    """
    return BENCHMARKS.register(name)
