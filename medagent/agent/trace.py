"""What traces keep of long values (``preview``) and the running usage counts of one question (``Counts``).

The steps and their records are ``medagent.agent.episode``; usage totals are integers there (milliseconds for
time) so they fit ``Prediction.usage``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# Longest string kept in a trace field: traces are for audit, not a copy of every document.
PREVIEW_CHARS = 300


def preview(value: Any, limit: int = PREVIEW_CHARS) -> Any:
    """Strings cut to ``limit``; containers cut recursively (arguments can hold whole option lists)."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "..."
    if isinstance(value, dict):
        return {str(k): preview(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [preview(v, limit) for v in value[:32]]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return preview(json.dumps(value, default=str), limit)


@dataclass
class Counts:
    """Running totals; ``Episode.delta`` subtracts two snapshots to attribute usage to one step."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    llm_s: float = 0.0
    retrieval_calls: int = 0
    retrieval_s: float = 0.0

    def copy(self) -> Counts:
        return Counts(**vars(self))
