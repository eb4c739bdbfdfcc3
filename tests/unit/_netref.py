"""Shared helpers of the network tests: the frozen references in ../shared/netref and synthetic interviews."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from medagent.interview.types import INQUIRY_CATEGORIES, Annotation, QuestionAnnotation

REPO = Path(__file__).resolve().parents[2]
# Read in place, never copied (../shared/netref/SOURCE.md).
NETREF = REPO.parent / "shared" / "netref"

needs_netref = pytest.mark.skipif(not NETREF.is_dir(), reason="../shared/netref not found")


def expected() -> dict[str, Any]:
    return json.loads((NETREF / "expected_values.json").read_text())


def read_matrix(name: str) -> tuple[list[str], list[str], np.ndarray]:
    with open(NETREF / name, newline="") as f:
        rows = list(csv.reader(f))
    return [r[0] for r in rows[1:]], rows[0][1:], np.array([[float(x) for x in r[1:]] for r in rows[1:]])


def read_plain_matrix(name: str) -> np.ndarray:
    """A CSV without row labels (the Almeida-Neto example)."""
    with open(NETREF / name, newline="") as f:
        rows = list(csv.reader(f))
    return np.array([[float(x) for x in r] for r in rows[1:]])


def read_rows(name: str) -> list[dict[str, str]]:
    with open(NETREF / name, newline="") as f:
        return list(csv.DictReader(f))


def read_partition(name: str, rows: list[str], cols: list[str]) -> tuple[list[int], list[int]]:
    part = {(r["node"], r["level"]): int(r["module"]) for r in read_rows(name)}
    return [part[(n, "row")] for n in rows], [part[(c, "col")] for c in cols]


def read_sequence(name: str) -> list[str]:
    return [r["state"] if "state" in r else r["seizure"] for r in read_rows(name)]


def synthetic_annotations(n: int = 90, seed: int = 0) -> list[Annotation]:
    """Interviews from three syndromes with their own findings, one shared finding and a fixed question
    flow (symptom-heavy first half, social history in the second half)."""
    rng = np.random.default_rng(seed)
    syndromes = [
        ("pharyngitis", ["sore throat", "fever", "odynophagia", "tonsillar exudate"]),
        ("copd", ["wheezing", "dyspnea", "sputum", "smoking history"]),
        ("pneumothorax", ["pleuritic pain", "sudden dyspnea", "tall stature", "chest tightness"]),
    ]
    early = ["symptom", "symptom", "medical_history", "symptom", "medication"]
    late = ["habit", "family_history", "exposure", "residence", "travel", "basic_information"]
    out = []
    for i in range(n):
        dx, specific = syndromes[i % 3]
        pos = [f for f in specific if rng.random() < 0.8] + (["coughing"] if rng.random() < 0.7 else [])
        cats = [c for c in early if rng.random() < 0.9] + [c for c in late if rng.random() < 0.7]
        qs = [QuestionAnnotation(t, f"q{t}", c) for t, c in enumerate(cats)]
        out.append(
            Annotation(
                interview_id=f"S{i:03d}",
                source="synthetic",
                annotator="gold",
                positive_findings=pos,
                negative_findings=["hemoptysis"],
                diagnoses=[dx],
                questions=qs,
            )
        )
    assert set(early + late) <= set(INQUIRY_CATEGORIES)
    return out
