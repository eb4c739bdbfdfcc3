"""Where inquiry categories come in an interview: the design's priorities and the physicians' order.

Shared by the network analysis (design validation) and the history-taking agent (its slot order and
completeness weights), so neither imports the other.

* ``conf/interview/priorities.yaml``: the hand-set category order and completeness weights of the paper
  (Jabbar et al.) and the empirical physician order; ``load_priorities`` checks each list covers the
  categories exactly once.
* Relative position of question ``t`` (0-based) of an interview with ``T`` questions is ``(t + 0.5) / T``;
  ``mean_positions`` averages it per category (``which="all"``) or over each interview's first question of
  the category (``which="first"``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray


def relative_positions(seq: Sequence[Hashable]) -> NDArray[np.float64]:
    """``(t + 0.5) / T`` for each position of one interview."""
    T = len(seq)
    return (np.arange(T) + 0.5) / T if T else np.zeros(0)


def mean_positions(
    seqs: Sequence[Sequence[Hashable]], states: Sequence[Hashable], which: str = "all"
) -> dict[Hashable, float]:
    """Mean relative position per category (NaN if never asked); ``which`` is ``all`` or ``first``."""
    if which not in ("all", "first"):
        raise ValueError(f"which must be 'all' or 'first', not {which!r}")
    acc: dict[Hashable, list[float]] = {s: [] for s in states}
    for seq in seqs:
        pos = relative_positions(seq)
        seen: set[Hashable] = set()
        for x, r in zip(seq, pos, strict=True):
            if which == "first" and x in seen:
                continue
            seen.add(x)
            acc[x].append(float(r))
    return {s: (float(np.mean(v)) if v else float("nan")) for s, v in acc.items()}


@dataclass(frozen=True)
class Priorities:
    """The agent's hand-set design (from the paper) and the empirical physician order (see the YAML)."""

    categories: list[str]
    priority_order: list[str]
    completeness_weights: dict[str, float]
    empirical_order: list[str]
    source: str


def load_priorities(path: str | Path | None = None) -> Priorities:
    """Reads ``conf/interview/priorities.yaml`` (or ``path``) and checks every list covers the categories."""
    if path is None:
        text = resources.files("conf").joinpath("interview/priorities.yaml").read_text(encoding="utf-8")
        source = "conf/interview/priorities.yaml"
    else:
        text, source = Path(path).read_text(encoding="utf-8"), str(path)
    d: dict[str, Any] = yaml.safe_load(text)
    cats = list(d["categories"])
    pr = Priorities(
        categories=cats,
        priority_order=list(d["paper"]["priority_order"]),
        completeness_weights={str(k): float(v) for k, v in d["paper"]["completeness_weights"].items()},
        empirical_order=list(d["empirical"]["priority_order"]),
        source=source,
    )
    for name, labels in (
        ("paper.priority_order", pr.priority_order),
        ("paper.completeness_weights", list(pr.completeness_weights)),
        ("empirical.priority_order", pr.empirical_order),
    ):
        if sorted(labels) != sorted(cats):
            raise ValueError(f"{source}: {name} must list each of the {len(cats)} categories exactly once")
    return pr
