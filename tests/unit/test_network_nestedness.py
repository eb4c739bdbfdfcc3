"""NODF (vegan-equal) and its null models (METHODS.md §1.3 and §4 cross-checks 1–2)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import chisquare

from medagent.network.nestedness import nodf, wnodf
from medagent.network.nulls import (
    NullBatch,
    nodf_null,
    null_matrices,
    null_nodf_batch,
    plan_batches,
    summarise_null,
)
from tests.unit._netref import expected, needs_netref, read_matrix, read_plain_matrix


@needs_netref
def test_almeida_neto_worked_example() -> None:
    ref = expected()["nodf"]["almeida_neto_2008_fig"]
    A = read_plain_matrix(ref["file"])
    for sort in (True, False):  # the example is already in nested order: both give the same numbers
        r = nodf(A, sort=sort)
        assert (r.nodf, r.n_row, r.n_col) == pytest.approx(
            (ref["NODF"], ref["N_row"], ref["N_col"]), abs=1e-6
        )


@needs_netref
def test_safariland_both_orderings_and_weighted() -> None:
    ref = expected()["nodf"]["Safariland_binary"]
    _, _, M = read_matrix("Safariland.csv")
    for key, r in (
        ("order_TRUE", nodf(M)),
        ("order_FALSE", nodf(M, sort=False)),
        ("weighted_WNODF_order_TRUE", wnodf(M)),
    ):
        assert (r.nodf, r.n_row, r.n_col) == pytest.approx(
            (ref[key]["NODF"], ref[key]["N_row"], ref[key]["N_col"]), abs=1e-6
        ), key
    # NODF is not the mean of N_row and N_col.
    r = nodf(M)
    assert abs(r.nodf - (r.n_row + r.n_col) / 2) > 2


def test_analytic_extremes() -> None:
    tri = np.triu(np.ones((6, 6)))
    assert nodf(tri).nodf == pytest.approx(100.0)
    assert nodf(np.eye(5)).nodf == 0.0
    chess = np.indices((6, 6)).sum(axis=0) % 2
    assert nodf(chess).nodf == 0.0
    assert wnodf(tri).nodf == 0.0  # WNODF needs strictly decreasing weights


def test_sorted_nodf_is_permutation_invariant_and_transpose_swaps_parts() -> None:
    rng = np.random.default_rng(5)
    B = rng.random((15, 11)) < 0.35
    base = nodf(B)
    P = B[rng.permutation(15)][:, rng.permutation(11)]
    assert nodf(P).nodf == pytest.approx(base.nodf, abs=1e-12)
    t = nodf(B.T)
    assert (t.nodf, t.n_row, t.n_col) == pytest.approx((base.nodf, base.n_col, base.n_row), abs=1e-12)
    W = rng.integers(0, 5, (15, 11)) * B
    assert wnodf(W[rng.permutation(15)]).nodf == pytest.approx(wnodf(W).nodf, abs=1e-12)


def test_zero_row_policy() -> None:
    B = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0]], dtype=float)
    with_zero = np.vstack([B, np.zeros(3)])
    kept = nodf(with_zero)  # vegan: the empty row stays in the denominator and contributes 0
    dropped = nodf(with_zero, empty="drop")
    assert dropped.nodf == pytest.approx(nodf(B).nodf)
    assert kept.n_row == pytest.approx(nodf(B).n_row * 3 / 6)
    assert kept.nodf < dropped.nodf
    assert math.isnan(nodf(np.ones((1, 1))).nodf)


def _is_binary_with_margins(M: np.ndarray, B: np.ndarray, rows: bool, cols: bool) -> bool:
    ok = M.sum() == B.sum()
    if rows:
        ok &= bool((M.sum(axis=1) == B.sum(axis=1)).all())
    if cols:
        ok &= bool((M.sum(axis=0) == B.sum(axis=0)).all())
    return bool(ok)


def test_null_models_keep_their_margins() -> None:
    rng = np.random.default_rng(2)
    B = rng.random((12, 9)) < 0.3
    for model, rows, cols in (
        ("r00", False, False),
        ("r0", True, False),
        ("c0", False, True),
        ("r1", True, False),
        ("curveball", True, True),
    ):
        for M in null_matrices(B, model, seed=1, count=20, burnin=50, thin=5):
            assert M.dtype == bool and _is_binary_with_margins(M, B, rows, cols), model


def test_curveball_uniform_over_permutation_matrices() -> None:
    draws = Counter(
        M.tobytes() for M in null_matrices(np.eye(3), "curveball", seed=0, count=3000, burnin=100, thin=7)
    )
    assert len(draws) == 6  # the 3x3 matrices with all margins 1
    assert chisquare(list(draws.values())).pvalue > 1e-3


def test_batches_are_pure_and_executor_independent() -> None:
    rng = np.random.default_rng(4)
    B = rng.random((10, 8)) < 0.4
    batch = NullBatch(B, "curveball", (3, 1), 5, burnin=100, thin=10)
    np.testing.assert_array_equal(null_nodf_batch(batch), null_nodf_batch(batch))

    def reversed_map(fn, items):  # type: ignore[no-untyped-def]
        return [fn(x) for x in reversed(list(items))][::-1]

    a = nodf_null(B, "curveball", n=23, seed=9, batch_size=5, burnin=100, thin=10)
    b = nodf_null(B, "curveball", n=23, seed=9, batch_size=5, burnin=100, thin=10, map_fn=reversed_map)
    np.testing.assert_array_equal(a.samples, b.samples)
    assert [x.count for x in plan_batches(B, "r00", 23, 0, 5)] == [5, 5, 5, 5, 3]


def test_summary_conventions() -> None:
    s = summarise_null(3.0, [1.0, 2.0, 3.0, 4.0])
    assert s.sd == pytest.approx(np.std([1, 2, 3, 4], ddof=1))
    assert s.z == pytest.approx((3.0 - 2.5) / s.sd)
    assert s.p_less == pytest.approx((1 + 3) / 5) and s.p_greater == pytest.approx((1 + 2) / 5)
    assert math.isnan(summarise_null(1.0, [2.0, 2.0]).z)  # sd 0: z undefined, p still reported


@needs_netref
@pytest.mark.parametrize(
    ("model", "n"), [("r00", 1000), ("r0", 1000), ("c0", 1000), ("r1", 1000), ("curveball", 300)]
)
def test_null_means_match_vegan_oecosimu(model: str, n: int) -> None:
    ref = expected()["nodf_null_models_vegan_oecosimu"]["Safariland_binary"]
    _, _, M = read_matrix("Safariland.csv")
    s = nodf_null(M, model, n=n, seed=20260101, batch_size=n, burnin=10_000, thin=100)
    assert s.obs == pytest.approx(ref["obs"], abs=1e-4)
    r = ref[model]
    se = math.hypot(r["sd"] / math.sqrt(n), r["sd"] / math.sqrt(4999))
    assert abs(s.mean - r["mean"]) < 4 * se, (s.mean, r["mean"], se)
    assert s.sd == pytest.approx(r["sd"], rel=0.15)
    assert s.z == pytest.approx(r["z"], abs=0.3 + 0.15 * abs(r["z"]))
