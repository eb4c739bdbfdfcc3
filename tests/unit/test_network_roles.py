"""Participation c and within-module z against bipartite ``czvalues`` (METHODS.md §1.4)."""

from __future__ import annotations

import numpy as np
import pytest

from medagent.network.roles import czvalues, role
from tests.unit._netref import needs_netref, read_matrix, read_partition, read_rows


@needs_netref
@pytest.mark.parametrize(("level", "suffix"), [("rows", "lower"), ("cols", "higher")])
def test_czvalues_match_bipartite(level: str, suffix: str) -> None:
    rows, cols, M = read_matrix("Safariland.csv")
    rl, cl = read_partition("partition_Safariland_binary.csv", rows, cols)
    ref = read_rows(f"czvalues_Safariland_binary_{suffix}.csv")
    assert [r["node"] for r in ref] == (rows if level == "rows" else cols)
    cz = czvalues(M, rl, cl, level)
    np.testing.assert_allclose(cz.c, [float(r["c"]) for r in ref], atol=1e-12)
    # R's NA (the only node of its type in its module) is NaN here; R's NaN (sd 0) became 0 there and here.
    np.testing.assert_allclose(cz.z, [np.nan if r["z"] == "NA" else float(r["z"]) for r in ref], atol=1e-12)


def test_c_bounds_and_single_module_partners() -> None:
    rng = np.random.default_rng(0)
    B = (rng.random((14, 10)) < 0.35).astype(float)
    B[0, :] = 1  # a row linked to every column
    rl, cl = rng.integers(0, 3, 14).tolist(), rng.integers(0, 3, 10).tolist()
    c = czvalues(B, rl, cl, "rows").c
    n_mod = len(set(rl) | set(cl))
    linked = B.sum(axis=1) > 0
    assert np.all((c[linked] >= -1e-12) & (c[linked] <= 1 - 1 / n_mod + 1e-12))
    same = np.zeros((2, 4))
    same[0, :2] = 1  # row 0's partners are columns 0 and 1, both in module "a"
    assert czvalues(same, ["a", "b"], ["a", "a", "b", "b"], "rows").c[0] == 0.0
    assert np.isnan(czvalues(same, ["a", "b"], ["a", "a", "b", "b"], "rows").c[1])  # degree 0: 0/0


def test_z_uses_same_type_nodes_and_sample_sd() -> None:
    B = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]], dtype=float)
    z = czvalues(B, [0, 0, 0], [0, 0, 0, 0], "rows").z
    k = np.array([3.0, 1.0, 1.0])
    np.testing.assert_allclose(z, (k - k.mean()) / k.std(ddof=1))


def test_roles() -> None:
    assert role(0.1, 0.0) == "peripheral"
    assert role(0.7, 0.0) == "connector"
    assert role(0.1, 3.0) == "module hub"
    assert role(0.7, 3.0) == "network hub"
    assert role(float("nan"), float("nan")) == "peripheral"
