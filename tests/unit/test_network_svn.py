"""Statistically validated links: hypergeometric p, Bonferroni and BH over N_t = |F|·|D| (METHODS.md §1.1)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import fisher_exact

from medagent.interview.types import Annotation
from medagent.network.svn import bh_adjust, bh_reject, hypergeom_p, incidence_from_annotations, svn_links
from tests.unit._netref import expected, needs_netref, read_rows


@needs_netref
@pytest.mark.parametrize("case", ["tea_tasting", "tea_tasting_4"])
def test_tea_tasting(case: str) -> None:
    ref = expected()["hypergeometric_svn"][case]
    over, _ = hypergeom_p(ref["N"], ref["N_A"], ref["N_B"], ref["N_AB"])
    assert float(over) == pytest.approx(ref["p_over"], rel=1e-12)
    num, den = map(int, ref["exact"].split("/"))
    assert float(over) == pytest.approx(num / den, rel=1e-12)


@needs_netref
def test_phyper_table_n231() -> None:
    for case in expected()["hypergeometric_svn"]["phyper_cases_N231"]:
        over, under = hypergeom_p(231, case["N_f"], case["N_d"], case["N_fd"])
        assert float(over) == pytest.approx(case["p_over"], rel=1e-9)
        assert float(under) == pytest.approx(case["p_under"], rel=1e-9)
        # Fisher's exact test (one-sided, greater) on the 2x2 table is the same p.
        a, nf, nd = case["N_fd"], case["N_f"], case["N_d"]
        table = [[a, nf - a], [nd - a, 231 - nf - nd + a]]
        assert fisher_exact(table, alternative="greater").pvalue == pytest.approx(case["p_over"], rel=1e-9)


@needs_netref
def test_toy_end_to_end_matches_r() -> None:
    rows = read_rows("svn_toy_interviews.csv")
    F = np.array([[int(r[f"F{i}"]) for i in range(1, 5)] for r in rows])
    D = np.array([[int(r[f"D{i}"]) for i in range(1, 4)] for r in rows])
    ref = expected()["hypergeometric_svn"]["toy_end_to_end"]
    res = svn_links(F, D, alpha=ref["alpha"])
    res05 = svn_links(F, D, alpha=0.05)
    assert res.n_tests == ref["N_tests"] == 12
    for r in read_rows(ref["expected"]):
        i, j = int(r["finding"][1:]) - 1, int(r["diagnosis"][1:]) - 1
        assert int(r["N"]) == res.N
        assert (res.N_f[i], res.N_d[j], res.N_fd[i, j]) == (int(r["N_f"]), int(r["N_d"]), int(r["N_fd"]))
        assert res.p_over[i, j] == pytest.approx(float(r["p_over"]), rel=1e-9)
        assert res.p_under[i, j] == pytest.approx(float(r["p_under"]), rel=1e-9)
        assert res.p_bh[i, j] == pytest.approx(float(r["p_bh"]), rel=1e-9)
        assert bool(res.bonferroni[i, j]) == (r["bonferroni_0.01"] == "TRUE")
        assert bool(res.bh[i, j]) == (r["bh_0.01"] == "TRUE")
        assert bool(res05.bh[i, j]) == (r["bh_0.05"] == "TRUE")
    # F4-D3 passes BH but not Bonferroni.
    assert res.bh[3, 2] and not res.bonferroni[3, 2]


@needs_netref
def test_bh_1995_example() -> None:
    ref = expected()["hypergeometric_svn"]["bh_1995_example"]
    p = np.array(ref["p"])
    assert bh_reject(p, ref["q"]).sum() == ref["n_rejected_BH"]
    assert (p < ref["q"] / p.size).sum() == ref["n_rejected_bonferroni"]
    np.testing.assert_allclose(bh_adjust(p), ref["bh_adjusted"], atol=5e-7)


@needs_netref
def test_bh_small_example() -> None:
    ref = expected()["hypergeometric_svn"]["bh_small_example"]
    assert bh_reject(ref["p"], ref["alpha"]).astype(int).tolist() == ref["reject"]


def test_p_symmetric_in_f_and_d() -> None:
    rng = np.random.default_rng(1)
    F = rng.random((40, 5)) < 0.3
    D = rng.random((40, 4)) < 0.4
    a, b = svn_links(F, D), svn_links(D, F)
    np.testing.assert_allclose(a.p_over, b.p_over.T, rtol=1e-12)
    np.testing.assert_allclose(a.p_under, b.p_under.T, rtol=1e-12)


def test_n_tests_counts_all_pairs() -> None:
    # F0-D0 is the only co-occurring pair: p = 1/C(20, 3) lies between alpha/20 and alpha/1, so it would
    # pass Bonferroni if only co-occurring pairs were counted, and fails with N_t = |F|*|D| = 10*2 = 20.
    N = 20
    F = np.zeros((N, 10), dtype=bool)
    D = np.zeros((N, 2), dtype=bool)
    F[:3, 0] = D[:3, 0] = True
    F[10:12, 1:] = True  # the other findings only in interviews without a diagnosis
    res = svn_links(F, D, alpha=0.01)
    assert res.n_tests == 20
    assert int((res.N_fd > 0).sum()) == 1
    p = res.p_over[0, 0]
    assert p == pytest.approx(1 / 1140)
    assert 0.01 / 20 < p < 0.01 / 1
    assert not res.bonferroni.any() and not res.bh.any()
    assert res.p_over[5, 1] == 1.0  # N_fd = 0 -> p = 1, still one of the N_t tests


def test_rare_findings_cannot_be_validated() -> None:
    over, _ = hypergeom_p(231, 1, 1, 1)
    assert float(over) == pytest.approx(1 / 231)
    assert float(over) > 0.01 / 4  # even with only 4 tests


def test_under_expression_is_the_lower_tail() -> None:
    over, under = hypergeom_p(50, 20, 20, 2)
    from scipy.stats import hypergeom

    assert float(under) == pytest.approx(hypergeom.cdf(2, 50, 20, 20))
    assert float(over) == pytest.approx(hypergeom.sf(1, 50, 20, 20))


def test_incidence_positive_only_binarised_all_interviews() -> None:
    anns = [
        Annotation(
            "1",
            "x",
            "gold",
            positive_findings=["cough", "cough", " fever "],
            negative_findings=["rash"],
            diagnoses=["flu"],
        ),
        Annotation("2", "x", "gold", positive_findings=["cough"], diagnoses=[]),
        Annotation("3", "x", "gold"),
    ]
    inc = incidence_from_annotations(anns)
    assert inc.n_interviews == 3
    assert inc.findings == ("cough", "fever")  # the negative "rash" is not a finding
    assert inc.F.sum() == 3 and inc.F[0].tolist() == [True, True]
    assert inc.diagnoses == ("flu",) and inc.D[:, 0].tolist() == [True, False, False]
    assert svn_links(inc.F, inc.D).N == 3


def test_bh_rejects_bad_n_tests() -> None:
    with pytest.raises(ValueError, match="n_tests"):
        bh_reject([0.01, 0.02], 0.05, n_tests=1)
