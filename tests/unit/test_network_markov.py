"""Markov order selection, cross-validated accuracy and the flow network (METHODS.md §1.7, §3)."""

from __future__ import annotations

import numpy as np
import pytest

from medagent.interview.order import mean_positions
from medagent.network.flow import category_shares, flow_network, transition_counts, two_phases
from medagent.network.markov import (
    collapse_runs,
    context_counts,
    cv_accuracy,
    fold_assignment,
    npar_full,
    prepare,
    select_order,
)
from tests.unit._netref import expected, needs_netref, read_sequence


@needs_netref
@pytest.mark.parametrize("name", ["koeberg_wind", "epileptic_seizures"])
def test_berchtold_raftery_tables(name: str) -> None:
    ref = expected()["markov_order"][name]
    seq = read_sequence(ref["file"])
    assert len(seq) == ref["n"]
    sel = select_order([seq], 3, start=ref["condition_on_first"])
    assert sel.n == ref["n_eff"] and sel.n_states == ref["states"]
    fits = sel.fits
    exact = ref["computed_exact"]
    np.testing.assert_allclose([f.loglik for f in fits], exact["logLik"], atol=6e-3)
    np.testing.assert_allclose([f.loglik for f in fits], ref["logLik"], atol=0.06)  # the paper's rounding
    assert [f.npar_observed for f in fits] == ref["npar_observed"]
    np.testing.assert_allclose([f.bic_observed for f in fits], ref["BIC_observed"], atol=0.06)
    np.testing.assert_allclose([f.aic_full for f in fits], exact["AIC_full"], atol=6e-3)
    if "npar_full" in exact:
        assert [f.npar_full for f in fits] == exact["npar_full"]
        np.testing.assert_allclose([f.bic_full for f in fits], exact["BIC_full"], atol=6e-3)
    for crit, order in ref["selected"].items():
        keys = {
            "BIC": ("bic_full", "bic_observed"),
            "BIC_observed": ("bic_observed",),
            "BIC_full": ("bic_full",),
            "AIC_full": ("aic_full",),
        }[crit]
        assert all(sel.selected[k] == order for k in keys), (crit, sel.selected)


@needs_netref
def test_mchmm_first_order_counts() -> None:
    ref = expected()["markov_order"]["mchmm_readme_counts"]
    c = context_counts([list(ref["sequence"])], 1)
    assert [[c[(a,)][b] for b in "ABC"] for a in "ABC"] == ref["first_order_counts_ABC"]


def test_full_parameter_counts() -> None:
    assert [npar_full(11, k) for k in range(4)] == [10, 110, 1210, 13310]


def test_cyclic_sequences() -> None:
    seqs = [list("ABC" * 6) for _ in range(8)]
    cv = cv_accuracy(seqs, 3, states="ABC", n_folds=4)
    assert cv.accuracy[1] == 1.0 and cv.accuracy[0] == pytest.approx(1 / 3)
    sel = select_order(seqs, 3)
    assert sel.selected["bic_full"] == sel.selected["aic_full"] == sel.selected["bic_observed"] == 1


def test_aabb_sequences() -> None:
    seqs = [list("AABB" * 5 + "AA") for _ in range(6)]
    cv = cv_accuracy(seqs, 2, states="AB", n_folds=3)
    assert cv.accuracy[1] == pytest.approx(0.5) and cv.accuracy[2] == 1.0
    assert select_order(seqs, 2).selected["bic_full"] == 2


def test_loglik_non_decreasing_on_common_targets() -> None:
    rng = np.random.default_rng(0)
    seqs = [rng.choice(list("abcd"), size=rng.integers(3, 30)).tolist() for _ in range(40)]
    ll = [f.loglik for f in select_order(seqs, 3).fits]
    assert all(b >= a - 1e-9 for a, b in zip(ll, ll[1:], strict=False))


def test_no_transition_across_interview_boundaries() -> None:
    seqs = [["A", "A"], ["B", "B"]]
    assert ("A",) in context_counts(seqs, 1) and context_counts(seqs, 1)[("A",)]["B"] == 0
    assert transition_counts(seqs, ["A", "B"]).tolist() == [[1, 0], [0, 1]]
    assert not flow_network(seqs, ["A", "B"]).has_edge("A", "B")


def test_order0_cv_equals_heldout_share_of_training_mode() -> None:
    rng = np.random.default_rng(3)
    seqs = [rng.choice(list("xyz"), p=[0.5, 0.3, 0.2], size=12).tolist() for _ in range(15)]
    cv = cv_accuracy(seqs, 2, states="xyz", n_folds=5, seed=1)
    folds = fold_assignment(len(seqs), 5, seed=1)
    hits = total = 0
    for f in range(5):
        train = [x for s, g in zip(seqs, folds, strict=True) if g != f for x in s]
        mode = max("xyz", key=lambda c: (train.count(c), -"xyz".index(c)))
        targets = [x for s, g in zip(seqs, folds, strict=True) if g == f for x in s[2:]]
        hits += targets.count(mode)
        total += len(targets)
    assert cv.n_targets == total and cv.accuracy[0] == pytest.approx(hits / total)


def test_self_loop_policy() -> None:
    assert collapse_runs(list("AABAAC")) == list("ABAC")
    assert prepare([list("AAB")], "collapse") == [["A", "B"]]
    with pytest.raises(ValueError):
        prepare([["A"]], "drop")


def test_flow_network_weights() -> None:
    rng = np.random.default_rng(2)
    states = list("abcde")
    seqs = [rng.choice(states, size=rng.integers(1, 15)).tolist() for _ in range(20)]
    G = flow_network(seqs, states)
    assert sum(d["count"] for *_, d in G.edges(data=True)) == sum(len(s) - 1 for s in seqs)
    n_c = {s: sum(1 for q in seqs for x in q[:-1] if x == s) for s in states}
    for s in states:
        assert G.out_degree(s, weight="count") == n_c[s]
        if n_c[s]:
            assert G.out_degree(s, weight="weight") == pytest.approx(1.0)


def test_positions_shares_and_two_phases() -> None:
    states = ["early1", "early2", "late1", "late2"]
    seqs = [["early1", "early2", "early1", "early2", "late1", "late2", "late1", "late2"] for _ in range(5)]
    ph = two_phases(seqs, states)
    assert 0.4375 < ph.tau <= 0.5625  # any cut between the 4th and the 5th question
    assert ph.phase == {"early1": 1, "early2": 1, "late1": 2, "late2": 2}
    pos = mean_positions(seqs, states)
    assert pos["early1"] < pos["late2"]
    assert mean_positions(seqs, states, "first")["early2"] == pytest.approx(1.5 / 8)
    assert category_shares(seqs, states)["late1"] == pytest.approx(0.25)
