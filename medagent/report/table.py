"""A report table: raw records (written as CSV) beside their formatted markdown cells."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NA = "—"


@dataclass
class Table:
    """Raw ``records`` (the CSV) and their formatted markdown ``cells``."""

    name: str
    title: str
    records: list[dict[str, Any]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    cells: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_markdown(self) -> str:
        lines = [f"### {self.title}", ""]
        if self.cells:
            lines.append("| " + " | ".join(self.columns) + " |")
            lines.append("|" + "|".join("---" for _ in self.columns) + "|")
            lines += ["| " + " | ".join(row) + " |" for row in self.cells]
        else:
            lines.append("_No data._")
        if self.notes:
            lines += ["", "Notes:", *(f"- {n}" for n in self.notes)]
        return "\n".join(lines).rstrip() + "\n"

    def write_csv(self, folder: Path) -> Path | None:
        if not self.records:
            return None
        path = folder / f"{self.name}.csv"
        keys: list[str] = []
        for rec in self.records:
            keys += [k for k in rec if k not in keys]
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            writer.writeheader()
            writer.writerows(self.records)
        return path


def pct(x: float | None, digits: int = 2) -> str:
    return NA if x is None else f"{100 * x:.{digits}f}"
