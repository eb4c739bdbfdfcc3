"""Spearman's rho of the agent's design against physicians (METHODS.md §1.6)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import spearmanr

from medagent.interview.order import load_priorities
from medagent.interview.types import INQUIRY_CATEGORIES
from medagent.network.validation import (
    average_ranks,
    exact_permutation_p,
    order_ranks,
    position_ranks,
    spearman_aligned,
    spearman_rho,
    validate_design,
)
from tests.unit._netref import expected, needs_netref


@needs_netref
def test_wikipedia_example() -> None:
    ref = expected()["spearman"]["wikipedia_iq_tv"]
    assert spearman_rho(ref["x"], ref["y"]) == pytest.approx(-29 / 165, abs=1e-15)
    assert spearman_rho(ref["x"], ref["y"]) == pytest.approx(ref["rho"], abs=1e-12)
    r = spearman_aligned(dict(enumerate(ref["x"])), dict(enumerate(ref["y"])))
    assert r.p_t == pytest.approx(ref["p_scipy_t_approx"], abs=1e-12)
    # R's "exact" p uses the AS 89 Edgeworth series for n >= 10; full enumeration gives 0.632142.
    assert r.p_exact == pytest.approx(ref["p_R_exact"], abs=5e-4)


@needs_netref
def test_ties_average_ranks() -> None:
    ref = expected()["spearman"]["ties"]
    assert spearman_rho(ref["x"], ref["y"]) == pytest.approx(ref["rho"], abs=1e-12)
    assert spearmanr(ref["x"], ref["y"]).statistic == pytest.approx(
        spearman_rho(ref["x"], ref["y"]), abs=1e-15
    )
    assert average_ranks([1, 2, 2, 3]).tolist() == [1.0, 2.5, 2.5, 4.0]


def test_exact_p_equals_enumeration() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, 7).astype(float)  # with ties
    y = rng.normal(size=7)
    obs = spearman_rho(x, y)
    sims = np.array([spearman_rho(x, y[list(p)]) for p in itertools.permutations(range(7))])
    lo, hi = np.mean(sims <= obs + 1e-12), np.mean(sims >= obs - 1e-12)
    assert exact_permutation_p(x, y) == pytest.approx(min(1.0, 2 * min(lo, hi)), abs=1e-12)


def test_alignment_by_label_not_position() -> None:
    a = {"x": 1.0, "y": 2.0, "z": 3.0, "w": 4.0}
    b = {"w": 40.0, "z": 30.0, "y": 20.0, "x": 10.0}
    assert spearman_aligned(a, b).rho == pytest.approx(1.0)
    r = spearman_aligned({**a, "v": 5.0}, {**b, "v": float("nan")})
    assert r.n == 4 and r.left_out == ["v"]


def test_priorities_yaml_and_orientation() -> None:
    pr = load_priorities()
    assert sorted(pr.categories) == sorted(INQUIRY_CATEGORIES)
    assert pr.priority_order[0] == "symptom" and pr.priority_order[-1] == "basic_information"
    assert sum(pr.completeness_weights.values()) == pytest.approx(1.0)
    assert order_ranks(["a", "b"]) == {"a": 1.0, "b": 2.0}
    assert position_ranks({"a": 0.2, "b": 0.1, "c": float("nan")})["b"] == 1.0
    # Physicians asking exactly in the agent's order, with attention proportional to the weights: rho = 1.
    positions = {c: i / 10 for i, c in enumerate(pr.priority_order)}
    out = validate_design(pr.completeness_weights, positions, pr)
    assert out["weights_vs_share"].rho == pytest.approx(1.0)
    assert out["order_vs_mean_position"].rho == pytest.approx(1.0)


def test_priorities_yaml_must_list_every_category(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "bad.yaml"
    p.write_text(
        "categories: [a, b]\npaper: {priority_order: [a], completeness_weights: {a: 1, b: 0}}\n"
        "empirical: {priority_order: [b, a]}\n"
    )
    with pytest.raises(ValueError, match="priority_order"):
        load_priorities(p)
