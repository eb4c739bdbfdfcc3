"""The public MediTOD sample: 3 annotated dialogues (gold) and the labelling tool's ontology.

Files under ``<data_root>/meditod_public_sample/`` (see its ``SOURCE.md``):
``data/dialogs.json`` (dialogues ``115``, ``317``, ``407`` = Fareez ``RES0006``, ``RES0045``, ``RES0054``) and
``meditod_ontology_from_labeling_interface.json`` (symptom, disease and antecedent values with synonyms).

How a gold ``Annotation`` is read from a dialogue (the conventions the evaluation relies on):

- **findings**: the dialogue state after the last patient turn (MediTOD's state is cumulative and the
  last value wins): ``positive_symptom`` values are the positive findings, ``negative_symptom`` the
  negative ones; ``unknown_symptom`` is not a finding.
- **diagnoses**: the ``disease`` values of doctor ``diagnosis`` actions, in order of first mention.
- **questions**: every doctor utterance with at least one ``inquire`` action; its category is the first
  slot key of its first ``inquire`` action, mapped to ``INQUIRY_CATEGORIES`` by ``CATEGORY_ALIASES``
  (two sample utterances carry two categories; the first one is kept). ``Turn.index`` = ``uttr_id``.

Inputs and labels are returned apart: annotators get the ``Interview`` only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medagent.interview.transcripts import Interview
from medagent.interview.types import INQUIRY_CATEGORIES, Annotation, QuestionAnnotation, Turn

MEDITOD_DIR = "meditod_public_sample"
DIALOGS_FILE = "data/dialogs.json"
ONTOLOGY_FILE = "meditod_ontology_from_labeling_interface.json"
# Word-overlap matches stated in SOURCE.md: the same interviews in the Fareez transcripts.
FAREEZ_IDS = {"115": "RES0006", "317": "RES0045", "407": "RES0054"}

# Slot keys of MediTOD inquiries -> the 11 categories. ``occupation`` is a MediTOD slot outside the 11:
# physicians ask about work to screen for occupational exposures, so it counts as ``exposure``.
CATEGORY_ALIASES: dict[str, str] = {
    **{c: c for c in INQUIRY_CATEGORIES},
    "occupation": "exposure",
    "symptom_dermatology": "symptom",
    "symptom (dermatology)": "symptom",
    "diseases/conditions": "disease",
}


@dataclass(frozen=True)
class OntologyEntry:
    """One ontology value: its code, display name and synonym keywords (raw, as the ontology gives them)."""

    code: str
    display_name: str
    keywords: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ontology:
    """The parts of the labelling ontology the annotators use."""

    symptoms: tuple[OntologyEntry, ...]
    diseases: tuple[OntologyEntry, ...]
    antecedents: tuple[OntologyEntry, ...]
    locations: tuple[str, ...] = field(default_factory=tuple)

    def symptom_names(self) -> list[str]:
        return [e.code for e in self.symptoms]


def meditod_dir(data_root: str | Path | None = None) -> Path:
    from medagent.data import resolve_data_root

    folder = resolve_data_root(data_root) / MEDITOD_DIR
    if not folder.is_dir():
        raise FileNotFoundError(f"no {MEDITOD_DIR}/ under the data root {folder.parent}")
    return folder


def _entries(values: list[dict[str, Any]]) -> tuple[OntologyEntry, ...]:
    return tuple(
        OntologyEntry(
            code=str(v["code"]).strip().lower(),
            display_name=str(v.get("display_name") or v["code"]).strip(),
            keywords=tuple(dict.fromkeys(str(k) for k in v.get("keywords") or [])),
        )
        for v in values
    )


def load_ontology(data_root: str | Path | None = None) -> Ontology:
    """Reads symptoms (103), diseases (52), antecedents (31) and body locations (240)."""
    raw = json.loads((meditod_dir(data_root) / ONTOLOGY_FILE).read_text(encoding="utf-8"))
    return Ontology(
        symptoms=_entries(raw["all_symptom_values"]["value"]),
        diseases=_entries(raw["all_diseases"]["value"]),
        antecedents=_entries(raw["all_antecendent_values"]["value"]),
        locations=tuple(str(v["code"]) for v in raw["all_symptom_locations"]["value"]),
    )


def ontology_files(data_root: str | Path | None = None) -> list[Path]:
    """The sample's files the annotators read (for manifest checksums)."""
    root = meditod_dir(data_root)
    return [root / DIALOGS_FILE, root / ONTOLOGY_FILE]


def _values(items: list[dict[str, Any]] | None) -> list[str]:
    out = [str(x["value"]) for x in items or [] if isinstance(x, dict) and x.get("value")]
    return list(dict.fromkeys(out))


def dialog_interview(dialog_id: str, utterances: list[dict[str, Any]]) -> Interview:
    """The text of a MediTOD dialogue as an ``Interview`` (labels stripped)."""
    turns = tuple(
        Turn(index=i, speaker=str(u["speaker"]), text=str(u["text"])) for i, u in enumerate(utterances)
    )
    return Interview(id=str(dialog_id), source="meditod", turns=turns)


def gold_annotation(dialog_id: str, utterances: list[dict[str, Any]]) -> Annotation:
    """The gold ``Annotation`` of one MediTOD dialogue (conventions in the module docstring)."""
    errors: list[str] = []
    state: dict[str, Any] = {}
    for u in utterances:
        if u.get("speaker") == "patient" and isinstance(u.get("dialog_state"), dict):
            state = u["dialog_state"]
    positive = _values(state.get("positive_symptom"))
    negative = [v for v in _values(state.get("negative_symptom")) if v not in positive]
    diagnoses: list[str] = []
    questions: list[QuestionAnnotation] = []
    for i, u in enumerate(utterances):
        if u.get("speaker") != "doctor":
            continue
        actions = u.get("actions") or []
        for a in actions:
            if a.get("action") == "diagnosis":
                diagnoses.extend(v for v in _values(a.get("disease")) if v not in diagnoses)
        inquiries = [a for a in actions if a.get("action") == "inquire"]
        if not inquiries:
            continue
        keys = [k for k in inquiries[0] if k != "action"]
        category = CATEGORY_ALIASES.get(keys[0]) if keys else None
        if category is None:
            errors.append(f"turn {i}: inquiry slot {keys[:1]} maps to no inquiry category; question skipped")
            continue
        questions.append(QuestionAnnotation(turn=i, text=str(u["text"]), category=category))
    return Annotation(
        interview_id=str(dialog_id),
        source="meditod",
        annotator="gold",
        positive_findings=positive,
        negative_findings=negative,
        diagnoses=diagnoses,
        questions=questions,
        errors=errors,
    )


def load_meditod(data_root: str | Path | None = None) -> list[tuple[Interview, Annotation]]:
    """The 3 public dialogues as ``(Interview, gold Annotation)`` pairs, in id order."""
    path = meditod_dir(data_root) / DIALOGS_FILE
    dialogs = json.loads(path.read_text(encoding="utf-8"))
    return [
        (dialog_interview(k, dialogs[k]["utterances"]), gold_annotation(k, dialogs[k]["utterances"]))
        for k in sorted(dialogs, key=lambda x: (len(x), x))
    ]


def gold_diagnoses(data_root: str | Path | None = None) -> dict[str, list[str]]:
    """Dialogue id -> its annotated diagnoses (the differential hit rate's gold; never shown to agents)."""
    return {iv.id: ann.diagnoses for iv, ann in load_meditod(data_root) if ann.diagnoses}
