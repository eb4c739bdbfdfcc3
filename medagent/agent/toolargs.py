"""Reading tool arguments in the shapes small models actually write.

Each helper accepts the documented shape (the tool's ``args`` model) and its common variants (ids as
``"D1, D3"`` or ``[1, 3]``, options as a list) and raises ``ToolError`` only where the model must be told to
try again. The replies of the tools' own calls are read by their output models.
"""

from __future__ import annotations

import re
from typing import Any


class ToolError(Exception):
    """The model's call cannot run as written; the message is shown to the model."""


def text_arg(args: dict[str, Any], key: str, default: str | None = None) -> str:
    value = args.get(key)
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"argument {key!r} must be a non-empty string")
    return value.strip()


def options_arg(value: Any) -> dict[str, str] | None:
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()} or None
    if isinstance(value, list):
        return {str(i): str(v) for i, v in enumerate(value, 1)} or None
    return None


def doc_handles(value: Any) -> list[str]:
    """``["D1", "d3"]``, ``"D1, D3"``, ``[1, 3]`` -> ``["D1", "D3"]`` (small models vary the shape)."""
    if isinstance(value, (str, int)):
        value = re.findall(r"[A-Za-z]*\d+", str(value))
    if not isinstance(value, list):
        return []
    out: list[str] = []
    for item in value:
        m = re.fullmatch(r"\s*\[?\s*(?:[Dd](?:oc)?\s*)?(\d+)\s*\]?\s*", str(item))
        if m and f"D{int(m.group(1))}" not in out:
            out.append(f"D{int(m.group(1))}")
    return out
