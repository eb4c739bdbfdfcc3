"""Inputs of the network analysis: CSV matrices, partitions and sequences (command line) and annotations."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from medagent.interview.types import Annotation
from medagent.network.meditod import read_meditod
from medagent.run.rundir import jsonl_lines
from medagent.types import Rejected


@dataclass(frozen=True)
class LabelledMatrix:
    """A matrix with row labels (first CSV column) and column labels (header)."""

    rows: list[str]
    cols: list[str]
    values: NDArray[np.float64]


def read_matrix_csv(path: str | Path) -> LabelledMatrix:
    """Reads a CSV whose first column holds row labels and whose header holds column labels (R's
    ``write.csv`` layout: the first header cell is ignored). Empty cells are errors, not zeros."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r]
    if len(rows) < 2:
        raise ValueError(f"{path}: need a header and at least one row")
    header, body = rows[0], rows[1:]
    cols = header[1:]
    values = []
    for n, r in enumerate(body, start=2):
        if len(r) != len(header):
            raise ValueError(f"{path}:{n}: {len(r)} cells, header has {len(header)}")
        try:
            values.append([float(x) for x in r[1:]])
        except ValueError as e:
            raise ValueError(f"{path}:{n}: {e}") from None
    return LabelledMatrix(
        [r[0] for r in body], cols, np.array(values, dtype=float).reshape(len(body), len(cols))
    )


def read_partition_csv(path: str | Path, m: LabelledMatrix) -> tuple[list[str], list[str]]:
    """Module labels of the rows and columns of ``m`` from a ``node,level,module`` CSV (level ``row|col``)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing_cols = {"node", "level", "module"} - set(reader.fieldnames or [])
        if missing_cols:
            raise ValueError(f"{path}: missing columns {sorted(missing_cols)}")
        part = {(r["node"], r["level"]): r["module"] for r in reader}
    missing = [n for n in m.rows if (n, "row") not in part] + [n for n in m.cols if (n, "col") not in part]
    if missing:
        raise ValueError(f"{path}: no module for {len(missing)} nodes, e.g. {missing[:3]}")
    return [part[(n, "row")] for n in m.rows], [part[(n, "col")] for n in m.cols]


def read_sequences_csv(path: str | Path) -> list[list[str]]:
    """State sequences from a CSV: one column (header + one state per line, a single sequence), or two
    columns ``sequence_id,state`` (one sequence per id, in order of appearance; no transition between ids)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r]
    if len(rows) < 2:
        raise ValueError(f"{path}: need a header and at least one state")
    width = len(rows[0])
    if width == 1:
        return [[r[0] for r in rows[1:]]]
    if width != 2:
        raise ValueError(f"{path}: expected 1 column (state) or 2 (sequence_id,state), got {width}")
    seqs: dict[str, list[str]] = {}
    for r in rows[1:]:
        seqs.setdefault(r[0], []).append(r[1])
    return list(seqs.values())


ANNOTATIONS_FILE = "annotations.jsonl"


@dataclass(frozen=True)
class LoadedAnnotations:
    """Annotations read from a run dir, a JSONL file or MediTOD JSON, with the rows set aside and the files read."""

    annotations: list[Annotation]
    rejected: list[Rejected]
    files: list[Path]


def load_annotations(path: str | Path) -> LoadedAnnotations:
    """Reads annotations for the network analysis.

    ``path`` is a run directory holding ``annotations.jsonl`` (from ``pipelines.annotate_interviews``), such a
    JSONL file itself, or a MediTOD ``dialogs.json`` (gold). A malformed JSONL line or a repeated interview
    id becomes a ``Rejected`` row with its reason; the others are kept.
    """
    p = Path(path)
    if p.is_dir():
        p = p / ANNOTATIONS_FILE
    if not p.is_file():
        raise FileNotFoundError(
            f"no annotations at {path} (expected a run dir with {ANNOTATIONS_FILE}, a .jsonl or dialogs.json)"
        )
    if p.suffix == ".json":
        return LoadedAnnotations(read_meditod(p), [], [p])
    anns: list[Annotation] = []
    rejected: list[Rejected] = []
    seen: set[str] = set()
    for n, line in enumerate(jsonl_lines(p.read_text(encoding="utf-8")), start=1):
        if not line.strip():
            continue
        try:
            a = Annotation.from_dict(json.loads(line))
        except (ValueError, KeyError, TypeError) as e:
            rejected.append(
                Rejected("annotations", n, f"invalid annotation: {type(e).__name__}: {e}", raw=line[:500])
            )
            continue
        if a.interview_id in seen:
            rejected.append(Rejected("annotations", n, "duplicate id", id=a.interview_id))
            continue
        seen.add(a.interview_id)
        anns.append(a)
    return LoadedAnnotations(anns, rejected, [p])
