"""The N_t conventions, the sensitivity grid and the label-permutation null of the KL information."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import hypergeom

from medagent.interview.information import kl_information
from medagent.network.permutation import kl_permutation_null
from medagent.network.sensitivity import SensitivityConfig, sensitivity_table
from medagent.network.svn import (
    bh_reject,
    count_tests,
    incidence_from_annotations,
    min_attainable_p,
    svn_links,
    tarone_k,
)
from tests.unit._netref import synthetic_annotations


def _incidence(n: int = 60, seed: int = 0):  # type: ignore[no-untyped-def]
    return incidence_from_annotations(synthetic_annotations(n, seed=seed))


def test_all_pairs_is_tumminellos_convention_and_the_default() -> None:
    inc = _incidence()
    a, b = svn_links(inc.F, inc.D), svn_links(inc.F, inc.D, n_tests="all_pairs")
    assert a.n_tests == b.n_tests == len(inc.findings) * len(inc.diagnoses)
    assert a.tested is not None and a.tested.all()
    np.testing.assert_array_equal(a.bh, b.bh)


def test_cooccurring_counts_only_pairs_seen_together() -> None:
    F = np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 1, 1], [0, 0, 1], [1, 0, 0]])
    D = np.array([[1, 0], [1, 0], [0, 1], [0, 1], [0, 1], [1, 0]])
    res = svn_links(F, D, alpha=0.2, n_tests="cooccurring")
    assert res.n_tests == int((res.N_fd > 0).sum()) == 3
    assert res.tested is not None and not res.tested[0, 1]  # F1 never with D2: not a test
    # BH over the tested p-values alone, with N_t = 3.
    expect = bh_reject(res.p_over[res.tested], 0.2, 3)
    np.testing.assert_array_equal(res.bh[res.tested], expect)
    assert not res.bh[~res.tested].any() and (res.p_bh[~res.tested] == 1).all()


def test_min_attainable_p_is_the_all_together_table() -> None:
    # N = 20, N_f = 3, N_d = 5: the best a pair can do is all 3 finding interviews carrying the diagnosis.
    assert float(min_attainable_p(20, 3, 5)) == pytest.approx(float(hypergeom.pmf(3, 20, 3, 5)), rel=1e-12)
    assert float(min_attainable_p(20, 0, 5)) == 1.0


def test_tarone_k_is_the_smallest_self_consistent_factor() -> None:
    # Pairs with p_min 1e-4 (2 of them) and 0.5 (8): K=1 leaves 2 > 1 testable at alpha 0.05; K=2 leaves
    # exactly the two, so K = 2.
    p_min = np.array([1e-4, 1e-4] + [0.5] * 8)
    assert tarone_k(p_min, 0.05) == 2
    assert tarone_k(np.full(5, 0.9), 0.05) == 1  # nothing testable: K = 1 with 0 pairs
    # Never more conservative than counting every pair.
    inc = _incidence()
    svn_all = svn_links(inc.F, inc.D, 0.01)
    nt, tested = count_tests("tarone", svn_all.N, svn_all.N_f, svn_all.N_d, svn_all.N_fd, 0.01)
    assert nt <= svn_all.n_tests and tested.sum() <= nt
    tar = svn_links(inc.F, inc.D, 0.01, "tarone")
    assert (tar.bonferroni >= svn_all.bonferroni).all()  # every all-pairs link survives Tarone too


def test_unknown_n_tests_convention_is_refused() -> None:
    with pytest.raises(ValueError, match="n_tests convention"):
        svn_links(np.eye(3), np.eye(3), n_tests="some")


def test_sensitivity_grid_rows_and_shared_cells() -> None:
    inc = _incidence()
    calls: list[int] = []

    def counting_map(fn, items):  # type: ignore[no-untyped-def]
        items = list(items)
        calls.append(len(items))
        return list(map(fn, items))

    cfg = SensitivityConfig(alphas=[0.05, 0.001], null_samples=4, restarts=2)
    rows = sensitivity_table(inc, cfg, burnin=50, thin=2, batch_size=2, map_fn=counting_map)
    assert len(rows) == 3 * 2 * 2
    by = {(r["n_tests"], r["alpha"], r["correction"]): r for r in rows}
    for conv in ("all_pairs", "cooccurring", "tarone"):
        assert by[(conv, 0.05, "bonferroni")]["links"] >= by[(conv, 0.001, "bonferroni")]["links"]
        assert by[(conv, 0.05, "bh")]["links"] >= by[(conv, 0.05, "bonferroni")]["links"]
    r = by[("all_pairs", 0.05, "bh")]
    assert r["N_t"] == len(inc.findings) * len(inc.diagnoses)
    assert r["modules"] == 3 and r["Q"] > 0.5 and np.isfinite(r["Q_null_mean"])
    assert 0 < r["Q_p"] <= 1
    # One modularity null per distinct link set, not per cell.
    distinct = {
        np.packbits(svn_links(inc.F, inc.D, a, c).validated(m)).tobytes()
        for c in cfg.n_tests
        for a in cfg.alphas
        for m in cfg.links
    }
    assert len(calls) == len(distinct) < len(rows)


def test_sensitivity_cell_without_links_reports_no_modules() -> None:
    inc = incidence_from_annotations(synthetic_annotations(3))
    rows = sensitivity_table(inc, SensitivityConfig(alphas=[0.001], null_samples=2, restarts=1))
    assert all(r["links"] == 0 and r["modules"] == 0 and np.isnan(r["Q"]) for r in rows)


def test_kl_null_removes_the_small_sample_bias_of_rare_findings() -> None:
    rng = np.random.default_rng(1)
    n = 200
    D = np.zeros((n, 4), dtype=int)
    D[np.arange(n), rng.integers(4, size=n)] = 1
    # Findings independent of the diagnoses, from common to rare.
    F = (rng.random((n, 6)) < np.array([0.6, 0.4, 0.2, 0.1, 0.04, 0.02])).astype(int)
    res = kl_permutation_null(F, D, "joint", n=200, seed=3)
    np.testing.assert_allclose(res.observed, kl_information(F.T @ D, "joint", D.sum(0)))
    # Raw KL falls with frequency although nothing is associated; the null shows the same fall.
    assert res.rho_obs < -0.5 and res.rho_null_mean < -0.5
    assert res.rho_p_less > 0.05
    assert np.nanmax(res.p[np.isfinite(res.p)]) > 0.05 and (res.p > 0.01).all()
    # Deterministic under its seed.
    again = kl_permutation_null(F, D, "joint", n=200, seed=3)
    np.testing.assert_array_equal(res.rho_samples, again.rho_samples)


def test_kl_null_flags_a_finding_tied_to_one_diagnosis() -> None:
    rng = np.random.default_rng(2)
    n = 150
    dx = rng.integers(3, size=n)
    D = np.eye(3, dtype=int)[dx]
    marker = (dx == 2) & (rng.random(n) < 0.5)  # only ever with diagnosis 2
    noise = rng.random(n) < 0.3
    res = kl_permutation_null(np.column_stack([marker, noise]), D, "prevalence", n=99, seed=0)
    assert res.p[0] == pytest.approx(1 / 100)
    assert res.excess[0] > 0.5 > abs(res.excess[1])
