"""Case facts from existing annotations: MediTOD's per-utterance slots of its 3 public dialogues.

MediTOD annotates each patient utterance with the slots it informs (``nlu``: ``positive_symptom``,
``negative_symptom``, ``positive_medical_history``, ``positive_habit``, ``travel``...; each item a
``value`` with attributes such as ``onset``, ``duration``, ``frequency``). Each item becomes one unit (its
value, with polarity from the slot's prefix) and each attribute another ("coughing onset: 4 days ago"), so
the units are atomic as the extracted facts are. The utterance is mapped to the Fareez transcript turn
with the same words (word-set Jaccard >= ``MIN_JACCARD``; ``meditod.FAREEZ_IDS`` pairs the dialogues),
and that whole turn is the unit's quote, so every unit rests on the patient's words as a fact must.

Two uses: model-free fact units for the validation of the patients on the annotated eval interviews
(``RES0045``, ``RES0054``), and a cross-check of the model extraction (``crosscheck``: the share of
annotated units an extracted fact on the same turn states).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from medagent.history.evaluation.facts_metrics import FactMatcher
from medagent.history.facts.store import Fact, FactSet
from medagent.interview.meditod import DIALOGS_FILE, FAREEZ_IDS, meditod_dir
from medagent.interview.types import Turn

MIN_JACCARD = 0.8
_WORD = re.compile(r"[a-z0-9']+")
_SKIP_ATTRS = {"value", "checks"}


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _turn_for(text: str, turns: Sequence[Turn]) -> Turn | None:
    want = _words(text)
    best, score = None, 0.0
    for t in turns:
        if t.speaker != "patient":
            continue
        have = _words(t.text)
        j = len(want & have) / len(want | have) if want | have else 0.0
        if j > score:
            best, score = t, j
    return best if score >= MIN_JACCARD else None


def _attr_text(v: Any) -> str:
    return ", ".join(map(str, v)) if isinstance(v, list) else str(v)


def meditod_units(
    utterances: list[dict[str, Any]], interview_id: str, turns: Sequence[Turn]
) -> tuple[FactSet, int]:
    """The units of one annotated dialogue on ``turns`` and how many patient utterances found no turn."""
    fs = FactSet(interview_id, "", "annotation:meditod", "")
    unmapped = 0
    for u in utterances:
        slots = [n.get("slots") or {} for n in u.get("nlu") or [] if isinstance(n, dict)]
        if u.get("speaker") != "patient" or not any(slots):
            continue
        turn = _turn_for(str(u.get("text", "")), turns)
        if turn is None:
            unmapped += 1
            continue
        for slot in slots:
            for name, items in slot.items():
                polarity = (
                    "absent"
                    if name.startswith("negative_")
                    else "uncertain"
                    if name.startswith("unknown_")
                    else "present"
                )
                category = name.split("_", 1)[-1] if "_" in name else name
                for item in items if isinstance(items, list) else []:
                    if not isinstance(item, dict) or not item.get("value"):
                        continue
                    value = str(item["value"])
                    base = f"no {value}" if polarity == "absent" else value
                    texts = [base] + [
                        f"{value} {k.replace('_', ' ')}: {_attr_text(v)}"
                        for k, v in item.items()
                        if k not in _SKIP_ATTRS and v
                    ]
                    for text in texts:
                        fs.facts.append(
                            Fact(
                                f"{interview_id}:A{len(fs.facts) + 1}",
                                category,
                                text,
                                polarity,
                                turn.text,
                                turn.index,
                            )
                        )
    return fs, unmapped


def load_meditod_units(
    turns_by_id: dict[str, Sequence[Turn]], data_root: str | None = None
) -> dict[str, FactSet]:
    """Units of the annotated dialogues whose Fareez id is in ``turns_by_id`` (its visible turns)."""
    dialogs = json.loads((meditod_dir(data_root) / DIALOGS_FILE).read_text(encoding="utf-8"))
    out: dict[str, FactSet] = {}
    for did, fid in FAREEZ_IDS.items():
        if fid in turns_by_id and did in dialogs:
            out[fid], _ = meditod_units(dialogs[did]["utterances"], fid, turns_by_id[fid])
    return out


def crosscheck(extracted: FactSet, annotated: FactSet, matcher: FactMatcher) -> dict[str, float | int]:
    """The share of annotated units stated by an extracted fact's statement on the same turn."""
    by_turn = extracted.by_turn()
    hit = 0
    for unit in annotated.facts:
        same = [f.statement for f in by_turn.get(unit.turn, [])]
        hit += bool(same) and bool(matcher.stated([unit], same))
    n = len(annotated.facts)
    return {"annotated_units": n, "stated_by_extracted": hit, "recall": hit / n if n else 0.0}
