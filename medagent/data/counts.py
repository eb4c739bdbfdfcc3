"""The QA paper's item sets beside the merged (or original) sets they replace: ``python -m medagent.data.counts``."""

from __future__ import annotations

from pathlib import Path

from medagent.data.paper import PAPER_SETS
from medagent.data.registry import load_benchmark


def item_counts(data_root: str | Path | None = None) -> list[tuple[str, int, int, int]]:
    """``(benchmark, items, rejected rows, golds that are not an option)`` of each set and its paper set."""
    out = []
    for merged, paper in PAPER_SETS.items():
        for name in (merged, paper):
            data = load_benchmark(name, data_root=data_root)
            bad = sum(g.answer not in (q.options or {}) for q, g in data.pairs)
            out.append((name, len(data), len(data.rejected), bad))
    return out


if __name__ == "__main__":
    for row in item_counts():
        print("{:20s} items {:5d}  rejected {}  gold not an option {}".format(*row))
