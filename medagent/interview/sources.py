"""Interview sources by name: adding a corpus is a config and a small function, never a new ``elif``.

A source is ``def load(data_root, *, prefix, ids, limit) -> (interviews, files_read)``; the files read go
into the run manifest's checksums.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from medagent.interview.meditod import DIALOGS_FILE, load_meditod, meditod_dir
from medagent.interview.transcripts import Interview, load_transcripts
from medagent.registry import Registry

SourceLoader = Callable[..., tuple[list[Interview], list[Path]]]
SOURCES: Registry[SourceLoader] = Registry("interview source")


@dataclass
class InterviewSet:
    """Loaded interviews (text only) and the files they came from."""

    name: str
    interviews: list[Interview]
    files: list[Path]


def register_interview_source(name: str) -> Callable[[SourceLoader], SourceLoader]:
    return SOURCES.register(name)


def list_interview_sources() -> list[str]:
    return SOURCES.names()


@register_interview_source("fareez")
def _fareez(
    data_root: str | Path | None, *, prefix: str | None, ids: list[str], limit: int | None
) -> tuple[list[Interview], list[Path]]:
    return load_transcripts(prefix, data_root, ids=ids or None, limit=limit)


@register_interview_source("meditod")
def _meditod(
    data_root: str | Path | None, *, prefix: str | None, ids: list[str], limit: int | None
) -> tuple[list[Interview], list[Path]]:
    interviews = [iv for iv, _gold in load_meditod(data_root)]  # the text only; labels stay behind
    if ids:
        missing = sorted(set(ids) - {iv.id for iv in interviews})
        if missing:
            raise FileNotFoundError(f"no MediTOD dialogue with id(s) {missing}")
        interviews = [iv for iv in interviews if iv.id in ids]
    return interviews[:limit] if limit is not None else interviews, [meditod_dir(data_root) / DIALOGS_FILE]


def load_interviews(
    name: str,
    source: str,
    data_root: str | Path | None = None,
    *,
    prefix: str | None = None,
    ids: list[str] | None = None,
    limit: int | None = None,
) -> InterviewSet:
    """Loads the interviews of ``source`` (``fareez`` | ``meditod``) selected by ``prefix`` / ``ids`` / ``limit``.

    Raises:
        KeyError: Unknown source (the message lists the registered ones).
        ValueError: Negative ``limit``.
    """
    load = SOURCES.get(source)  # KeyError listing the registered sources
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    interviews, files = load(data_root, prefix=prefix, ids=list(ids or []), limit=limit)
    return InterviewSet(name=name, interviews=interviews, files=files)
