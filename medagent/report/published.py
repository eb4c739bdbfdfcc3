"""What our numbers are set beside: the QA paper's published values (``conf/published/qa_paper.yaml``) and the
authors' lab's own stored answers on the same USMLE items (``usmle_paper/`` in the data root).

Published accuracies are kept in % as printed; ``Published`` hands them out as fractions, as every other
accuracy in the report is.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from medagent.data.paper import item_index

PUBLISHED_FILE = Path("conf") / "published" / "qa_paper.yaml"
REFERENCE_DIR = "usmle_paper"


def paper_benchmark(benchmark: str) -> str:
    """The paper's name of a benchmark: ``usmle_step1_paper`` and ``usmle_step1`` are both Step 1."""
    return benchmark.removesuffix("_paper")


def repository_root() -> Path | None:
    """The folder holding ``pyproject.toml`` above this package (None when installed elsewhere)."""
    return next((p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file()), None)


@dataclass
class Published:
    """The paper's values by table, accuracies as fractions; a missing value is None, never 0."""

    table1: dict[str, dict[str, float]] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)
    table2: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    table3: dict[str, dict[str, float]] = field(default_factory=dict)
    fig3: dict[str, dict[int, float]] = field(default_factory=dict)
    lab_medexpqa: dict[str, float] = field(default_factory=dict)
    source: str = ""

    def accuracy(self, row: str, benchmark: str) -> float | None:
        """Table 1's ``row`` (``agent``, ``gpt-4``, a model) on ``benchmark``, as a fraction."""
        v = self.table1.get(row, {}).get(paper_benchmark(benchmark))
        return None if v is None else v / 100

    def row_of(self, mode: str, llm: str) -> str | None:
        """The Table 1 row a run is compared with: the agent for ``full``, a model's row for its standalone."""
        if mode == "full":
            return "agent"
        return self.models.get(llm) if mode == "standalone" else None

    def drop(self, ablation: str, benchmark: str) -> float | None:
        """Table 3: full minus ``ablation`` in accuracy points, as a fraction (1.07 points -> 0.0107)."""
        v = self.table3.get(ablation, {}).get(paper_benchmark(benchmark))
        return None if v is None else v / 100

    def ratio(self, benchmark: str, top_r: int | None) -> float | None:
        """Fig. 3: accuracy / GPT-4's - 1 at ``top_r``, as a fraction (+5.60 % -> 0.056)."""
        v = self.fig3.get(paper_benchmark(benchmark), {}).get(top_r or -1)
        return None if v is None else v / 100

    def open_ended(self, metric: str, benchmark: str) -> float | None:
        """Table 2: the agent's mean ``metric`` on ``benchmark``."""
        return self.table2.get("agent", {}).get(metric, {}).get(paper_benchmark(benchmark))


def load_published(path: str | Path | None = None) -> Published:
    """Reads the published values (default: ``conf/published/qa_paper.yaml`` of this repository).

    Raises:
        FileNotFoundError: No such file (the message names where it was looked for).
    """
    if path is None:
        root = repository_root()
        if root is None:
            raise FileNotFoundError(f"no repository root above {__file__} to find {PUBLISHED_FILE}")
        path = root / PUBLISHED_FILE
    data: dict[str, Any] = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return Published(
        table1={k: dict(v) for k, v in (data.get("table1") or {}).items()},
        models=dict(data.get("models") or {}),
        table2={k: {m: dict(b) for m, b in v.items()} for k, v in (data.get("table2") or {}).items()},
        table3={k: dict(v) for k, v in (data.get("table3") or {}).items()},
        fig3={b: {int(r): float(x) for r, x in v.items()} for b, v in (data.get("fig3") or {}).items()},
        lab_medexpqa=dict(data.get("lab_medexpqa") or {}),
        source=str(Path(path)),
    )


@dataclass
class LabReference:
    """The lab's stored Qwen2.5-Instruct answers on the paper's USMLE items.

    Attributes:
        accuracy: ``(model, step) -> (correct, items in its file, accuracy over the paper's n)``.
        correct: ``(model, step) -> {lab-file index: 1 or 0}``; an item the lab's file lacks is absent.
    """

    accuracy: dict[tuple[str, int], tuple[int, int, float]] = field(default_factory=dict)
    correct: dict[tuple[str, int], dict[int, int]] = field(default_factory=dict)

    def models(self) -> list[str]:
        return sorted({m for m, _ in self.correct}, key=lambda m: float(m.rstrip("B")))

    def outcomes(self, model: str, benchmark: str) -> dict[int, int]:
        """Per-item outcomes of ``model`` on a ``usmle_step<n>_paper`` benchmark (empty for any other)."""
        name = paper_benchmark(benchmark)
        if not name.startswith("usmle_step") or not benchmark.endswith("_paper"):
            return {}
        return self.correct.get((model, int(name[-1])), {})


def load_lab_reference(data_root: Path) -> LabReference | None:
    """Reads ``usmle_paper/reference_accuracy.csv`` and ``reference_predictions.json``; None when absent."""
    folder = data_root / REFERENCE_DIR
    acc_file, pred_file = folder / "reference_accuracy.csv", folder / "reference_predictions.json"
    if not acc_file.is_file() or not pred_file.is_file():
        return None
    ref = LabReference()
    with acc_file.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            key = (row["model"], int(row["step"]))
            ref.accuracy[key] = (
                int(row["correct"]),
                int(row["n_in_file"]),
                float(row["accuracy_pct_over_paper_n"]),
            )
    for model, steps in json.loads(pred_file.read_text(encoding="utf-8")).items():
        for step, items in steps.items():
            ref.correct[(model, int(step.removeprefix("step")))] = {
                int(it["index"]): int(bool(it["correct"])) for it in items if it.get("prediction") is not None
            }
    return ref


def by_item(outcomes: dict[str, int]) -> dict[int, int]:
    """Our per-question outcomes keyed by the lab-file index carried in paper-item ids."""
    out = {}
    for qid, ok in outcomes.items():
        index = item_index(qid)
        if index is not None:
            out[index] = ok
    return out
