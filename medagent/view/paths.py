"""The viewer reads files under the run directories it was given, and nothing else.

Every path a request names is resolved (symlinks followed, ``..`` collapsed) and must land inside its run
directory; anything else is refused before a byte is read. URL decoding happens in the web framework, so an
encoded ``%2e%2e`` arrives here as ``..`` and is refused the same way.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath


class OutsideRunError(ValueError):
    """A requested path is not a file under the run directory (traversal, absolute path, symlink out)."""


def confined(root: Path, relative: str) -> Path:
    """``root / relative`` resolved, when it is a regular file inside ``root`` (itself resolved).

    Raises:
        OutsideRunError: ``relative`` is absolute, has a NUL, or resolves outside ``root``; or the file
            does not exist (not distinguished, so a probe learns nothing about the disk outside a run).
    """
    base = root.resolve()
    if not relative or "\x00" in relative or "\\" in relative:
        raise OutsideRunError(f"refused path {relative!r}")
    rel = PurePosixPath(relative)
    if rel.is_absolute() or ".." in rel.parts:
        raise OutsideRunError(f"refused path {relative!r}")
    target = (base / rel).resolve()
    if not target.is_relative_to(base) or not target.is_file():
        raise OutsideRunError(f"refused path {relative!r}")
    return target
