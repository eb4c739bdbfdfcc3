"""Config drift between two invocations of one run directory (refusing a resume that would mix settings).

A run directory is resumed by rerunning with the same ``run_dir``; nothing in the folder's name says which
scale, reranker or index produced the answers already there. ``config_drift`` compares the config recorded
in the previous manifest with the current one, so the pipeline can refuse to append answers produced under
other settings to the same ``predictions.jsonl``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Any

# Stands for a key one side lacks (a field added or removed between code versions).
ABSENT = "<absent>"


class ConfigDriftError(ValueError):
    """Resuming a run directory with settings that differ from those that produced its answers."""


def _flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted leaves of a JSON-like value; list items are keyed by index (``open_scoring.embedders.0.name``).

    An empty dict or list is a leaf of its own, so ``{}`` versus ``{"a": 1}`` shows up as ``x.a``.
    """
    if isinstance(value, Mapping) and value:
        for k, v in value.items():
            yield from _flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, (list, tuple)) and value:
        for i, v in enumerate(value):
            yield from _flatten(v, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix, value


def is_ignored(key: str, ignore: Collection[str]) -> bool:
    """``key`` equals a pattern, lies under one (``cluster`` covers ``cluster.workers.count``) or matches a
    glob (``*.local_path``)."""
    return any(key == p or key.startswith(p + ".") or fnmatchcase(key, p) for p in ignore)


def _normal(value: Any) -> Any:
    # A manifest is JSON: tuples came back as lists, ints stored in float fields stay numerically equal.
    return list(value) if isinstance(value, tuple) else value


def config_drift(
    previous: Mapping[str, Any], current: Mapping[str, Any], ignore: Collection[str] = ()
) -> list[str]:
    """Dotted keys whose values differ between two configs (sorted), leaving out the ``ignore`` patterns.

    A key present on one side only counts as a difference: a setting that did not exist when the earlier
    answers were produced may change them. Patterns are described in ``is_ignored``.
    """
    before, after = dict(_flatten(previous)), dict(_flatten(current))
    keys = set(before) | set(after)
    return sorted(
        k
        for k in keys
        if not is_ignored(k, ignore) and _normal(before.get(k, ABSENT)) != _normal(after.get(k, ABSENT))
    )


def describe_drift(previous: Mapping[str, Any], current: Mapping[str, Any], keys: list[str]) -> str:
    """One ``key: old -> new`` line per drifted key, for the error message."""
    before, after = dict(_flatten(previous)), dict(_flatten(current))
    return "\n".join(f"  {k}: {before.get(k, ABSENT)!r} -> {after.get(k, ABSENT)!r}" for k in keys)


def check_resume(
    previous_manifest: Mapping[str, Any] | None,
    current: Mapping[str, Any],
    ignore: Collection[str],
    *,
    run_dir: str,
    answered: int,
) -> None:
    """Refuses to resume ``run_dir`` when its answers were produced under other settings.

    Args:
        previous_manifest: The run dir's ``manifest.json`` before this invocation (None: a new run).
        current: This invocation's config, JSON-like (as the manifest will record it).
        ignore: Keys allowed to change between attempts (``is_ignored`` patterns).
        run_dir: For the message.
        answered: Answers already in the run dir; with none there is nothing to mix, so nothing is checked.

    Raises:
        ConfigDriftError: Some key outside ``ignore`` differs; the message lists each with both values.
    """
    previous = (previous_manifest or {}).get("config")
    if not answered or not isinstance(previous, Mapping):
        return
    keys = config_drift(previous, current, ignore)
    if keys:
        raise ConfigDriftError(
            f"run_dir={run_dir} already holds {answered} answers produced with other settings; resuming "
            f"would mix both in one predictions.jsonl. Differing keys (previous -> now):\n"
            f"{describe_drift(previous, current, keys)}\n"
            "Use another run_dir for the new settings, or pass resume_check=false to resume anyway (only "
            "when the change cannot alter answers)."
        )
