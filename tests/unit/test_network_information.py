"""KL(P(D|f) || P(D)) with both prior conventions (METHODS.md §1.5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import rel_entr
from scipy.stats import entropy

from medagent.interview.information import conditional, kl_information, mutual_information, prior
from medagent.network.svn import svn_links
from tests.unit._netref import expected, needs_netref, read_rows


def _toy() -> tuple[np.ndarray, np.ndarray]:
    rows = read_rows("svn_toy_interviews.csv")
    F = np.array([[int(r[f"F{i}"]) for i in range(1, 5)] for r in rows])
    D = np.array([[int(r[f"D{i}"]) for i in range(1, 4)] for r in rows])
    res = svn_links(F, D)
    return res.N_fd, res.N_d


@needs_netref
def test_scipy_doc_example() -> None:
    ref = expected()["kl_information"]["scipy_doc"]
    kl = kl_information([ref["pk"]], "prevalence", diagnosis_counts=ref["qk"])
    assert kl[0] == pytest.approx(ref["KL_nats"], abs=1e-12)
    assert rel_entr(ref["pk"], ref["qk"]).sum() == pytest.approx(ref["KL_nats"], abs=1e-12)


@needs_netref
def test_toy_kl_prevalence_and_mi_identity() -> None:
    ref = expected()["kl_information"]["toy"]
    cooc, nd = _toy()
    np.testing.assert_allclose(prior(cooc, "prevalence", nd), ref["P_d_prevalence"], atol=1e-12)
    P = conditional(cooc)
    nats = kl_information(cooc, "prevalence", nd)
    bits = kl_information(cooc, "prevalence", nd, base=2)
    for i, r in enumerate(read_rows(ref["expected"])):
        np.testing.assert_allclose(P[i], [float(r[f"P_D{j}_given_f"]) for j in (1, 2, 3)], atol=1e-12)
        assert nats[i] == pytest.approx(float(r["KL_nats"]), abs=1e-12)
        assert bits[i] == pytest.approx(float(r["KL_bits"]), abs=1e-12)
    np.testing.assert_allclose(bits, nats / math.log(2), rtol=1e-12)
    # With the joint-table marginal, sum_f P(f) KL_f = I(F; D).
    pf = cooc.sum(axis=1) / cooc.sum()
    joint = kl_information(cooc, "joint")
    assert float(pf @ joint) == pytest.approx(ref["mutual_information_nats"], abs=1e-11)
    assert mutual_information(cooc) == pytest.approx(ref["mutual_information_nats"], abs=1e-11)
    # The two priors differ (pitfall 2): prevalence does not give the identity.
    assert abs(float(pf @ nats) - ref["mutual_information_nats"]) > 1e-4


def test_kl_nonnegative_zero_when_independent_and_entropy_agrees() -> None:
    rng = np.random.default_rng(1)
    cooc = rng.integers(0, 9, (6, 4)).astype(float)
    kl = kl_information(cooc, "joint")
    assert np.all(kl >= 0)
    P, q = conditional(cooc), prior(cooc, "joint")
    np.testing.assert_allclose(kl, [entropy(p, q) for p in P], atol=1e-12)
    indep = np.outer([1, 2, 3], [2, 5, 1])  # every P(D|f) equals the marginal
    np.testing.assert_allclose(kl_information(indep, "joint"), 0, atol=1e-12)


def test_finding_without_diagnosis_has_nan_iv() -> None:
    kl = kl_information([[2, 1], [0, 0]], "joint")
    assert np.isfinite(kl[0]) and np.isnan(kl[1])
    with pytest.raises(ValueError, match="diagnosis_counts"):
        kl_information([[1, 1]], "prevalence")
