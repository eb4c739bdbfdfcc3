"""MediTOD gold annotations (a ``dialogs.json`` file, Saley et al. 2024) as ``Annotation`` objects.

The reading rules live in one place, ``medagent.interview.meditod.gold_annotation``, which the annotators'
evaluation also uses, so gold data means the same thing to both: findings from the last cumulative dialogue
state (positive / negative symptoms), diagnoses from doctor ``diagnosis`` actions, and one question per
doctor utterance with an ``inquire`` action, its category being the first slot of the first inquiry.
This module only reads any such file, wherever it is (the analysis takes a path, not a data root).
"""

from __future__ import annotations

import json
from pathlib import Path

from medagent.interview.meditod import gold_annotation
from medagent.interview.types import Annotation


def read_meditod(path: str | Path) -> list[Annotation]:
    """All dialogues of a MediTOD ``dialogs.json`` (``{dialog_id: {"utterances": [...]}}``), in file order."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of dialogues keyed by id")
    out = []
    for dialog_id, dialog in data.items():
        utterances = dialog.get("utterances") if isinstance(dialog, dict) else None
        if not isinstance(utterances, list):
            raise ValueError(f"{path}: dialogue {dialog_id} has no 'utterances' list")
        out.append(gold_annotation(str(dialog_id), utterances))
    return out
