"""The whole analysis on annotations: files, conventions, executor independence, input readers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from medagent.network.analysis import NetworkAnalysisConfig, analyze
from medagent.network.figures import FIGURES
from medagent.network.inputs import load_annotations
from medagent.network.meditod import read_meditod
from medagent.network.report import REPORT, SUMMARY, TABLES, write_report
from medagent.network.sensitivity import SensitivityConfig
from tests.unit._netref import REPO, synthetic_annotations

FAST = NetworkAnalysisConfig(
    null_samples=40,
    null_batch_size=20,
    modularity_restarts=3,
    modularity_null_samples=12,
    modularity_null_batch_size=5,
    curveball_burnin=200,
    curveball_thin=5,
    cv_folds=5,
    kl_null_samples=30,
    min_null_samples=10,
    phase_null_samples=12,
    # Q only per cell here (no map_fn calls); test_sensitivity_* cover the cell nulls.
    sensitivity=SensitivityConfig(alphas=[0.05, 0.01], null_samples=0, restarts=2),
)
MEDITOD = REPO.parent / "shared" / "data" / "meditod_public_sample" / "data" / "dialogs.json"


def test_analysis_on_synthetic_interviews_writes_everything(tmp_path: Path) -> None:
    a = analyze(synthetic_annotations(60), FAST)
    assert a.n_interviews == 60
    assert a.svn.n_tests == len(a.incidence.findings) * len(a.incidence.diagnoses)
    assert a.modules_binary is not None and a.modules_binary.modules == 3  # the three syndromes
    assert "hemoptysis" not in a.incidence.findings  # negatives never enter G_B
    assert set(a.nulls) == {"r00", "r1", "curveball"} and all(s.n == 40 for s in a.nulls.values())
    qn = a.modularity_null
    assert qn is not None and qn.n == 12 and qn.model == "curveball"
    assert qn.obs == a.modules_binary.Q
    assert a.markov is not None and a.markov.selected["bic_full"] == 1
    assert a.phases.phase["symptom"] == 1 and a.phases.phase["travel"] == 2
    s = write_report(a, tmp_path)
    for name in FIGURES:
        assert (tmp_path / "figures" / name).stat().st_size > 1000, name
    for table in (
        "svn_links.csv",
        "findings.csv",
        "modules.csv",
        "modularity_null.csv",
        "modularity_null_samples.csv",
        "nodf_nulls.csv",
        "markov_orders.csv",
        "cv_accuracy.csv",
        "flow_edges.csv",
        "category_positions.csv",
        "validation.csv",
        "sensitivity.csv",
        "markov_both.csv",
    ):
        assert (tmp_path / TABLES / table).exists(), table
    report = (tmp_path / REPORT).read_text()
    for words in (
        "N_t = |F|*|D|",
        "sorted by decreasing fill",
        "P(D) = joint",
        "self-loops collapse (runs of one category merged into one visit)",
        "| keep | 1 |",
        "| collapse (headline) | 1 |",
        "label permutation",
        "| tarone |",
        "npar full",
        "p_less",
        "Significance of Q_B",
        "each optimised like G_B",
    ):
        assert words in report, words
    assert json.loads((tmp_path / SUMMARY).read_text())["n_interviews"] == 60
    assert s["modularity"]["binary"]["modules"] == 3
    assert s["modularity_null"]["n"] == 12 and s["modularity_null"]["seed"] == FAST.seed
    assert s["modularity_null"]["p"] == s["modularity_null"]["p_greater"]
    # The grid: 3 N_t conventions x 2 alphas x 2 corrections, each with the link count it decides.
    assert len(s["sensitivity"]) == 12
    assert {r["n_tests"] for r in s["sensitivity"]} == {"all_pairs", "cooccurring", "tarone"}
    assert set(s["markov_by_loops"]) == {"keep", "collapse"}
    assert s["kl_null"]["n"] == 30


def test_null_samples_do_not_depend_on_the_executor() -> None:
    calls: list[int] = []

    def recording_map(fn, items):  # type: ignore[no-untyped-def]
        items = list(items)
        calls.append(len(items))
        return [fn(x) for x in reversed(items)][::-1]

    anns = synthetic_annotations(45, seed=2)
    a, b = analyze(anns, FAST), analyze(anns, FAST, map_fn=recording_map)
    # 12 modularity nulls in batches of 5, then 40 NODF samples in batches of 20 per null model.
    assert calls == [3, 2, 2, 2]
    for model in a.nulls:
        np.testing.assert_array_equal(a.nulls[model].samples, b.nulls[model].samples)
    assert a.modularity_null is not None and b.modularity_null is not None
    np.testing.assert_array_equal(a.modularity_null.samples, b.modularity_null.samples)
    assert repr(a.modularity_null.to_dict()) == repr(b.modularity_null.to_dict())  # NaN z: by repr


def test_both_self_loop_conventions_are_fitted_on_their_own_sequences() -> None:
    anns = synthetic_annotations(30, seed=4)
    a = analyze(anns, FAST)
    keep, collapse = a.markov_by_loops["keep"], a.markov_by_loops["collapse"]
    assert keep is not None and collapse is not None
    # Every interview opens "symptom, symptom" with probability 0.81: collapsing runs removes targets.
    assert collapse.n < keep.n
    assert a.markov is collapse and a.cv is a.cv_by_loops["collapse"]
    b = analyze(anns, NetworkAnalysisConfig(**{**FAST.__dict__, "self_loops": "keep"}))
    assert b.markov is not None and b.markov.n == keep.n
    assert b.markov.fits[1].loglik == pytest.approx(keep.fits[1].loglik)


def test_kl_permutation_columns_join_the_findings_table() -> None:
    a = analyze(synthetic_annotations(60), FAST)
    assert a.kl_null is not None
    rows = {r["finding"]: r for r in a.finding_table}
    # Syndrome-specific findings carry information beyond the permutation null; "coughing" (in every
    # syndrome at the same rate) does not.
    assert rows["tonsillar exudate"]["KL_joint_perm_p"] <= 1 / 31 + 1e-12
    assert rows["coughing"]["KL_joint_perm_p"] > 0.05
    assert rows["coughing"]["KL_joint_excess"] < rows["tonsillar exudate"]["KL_joint_excess"]


def test_no_validated_link_is_reported_not_raised(tmp_path: Path) -> None:
    anns = synthetic_annotations(3)
    a = analyze(anns, FAST)
    assert a.network.n_links == 0 and a.modules_binary is None and not a.nulls and a.modularity_null is None
    assert any("no bh link" in n for n in a.notes)
    write_report(a, tmp_path)
    assert "no bh link" in (tmp_path / REPORT).read_text()


@pytest.mark.skipif(not MEDITOD.exists(), reason="MediTOD public sample not found")
def test_meditod_gold_reader() -> None:
    anns = {a.interview_id: a for a in read_meditod(MEDITOD)}
    assert list(anns) == ["115", "317", "407"]
    a = anns["115"]
    assert a.annotator == "gold" and a.source == "meditod"
    assert a.positive_findings == ["coughing", "dyspnea", "colored/excess sputum", "wheezing"]
    assert "hemoptysis" in a.negative_findings and a.diagnoses == ["chronic bronchitis"]
    assert anns["407"].diagnoses == ["seborrheic keratosis", "chronic obstructive airway disease"]
    # 407 first denied "pain", then reported it: positive only (the last dialog state wins).
    assert "pain" in anns["407"].positive_findings and "pain" not in anns["407"].negative_findings
    # One question per doctor utterance with an inquiry (the first category: turn 56 of 317 asks about a
    # symptom and a test), the same rules as the annotators' gold reader.
    assert [q.category for q in anns["317"].questions if q.turn == 56] == ["symptom"]
    assert a.questions[0].category == "symptom" and len(a.questions) == 48
    from medagent.interview.meditod import gold_annotation

    raw = json.loads(MEDITOD.read_text())
    assert anns["407"] == gold_annotation("407", raw["407"]["utterances"])


def test_load_annotations_sets_bad_rows_aside(tmp_path: Path) -> None:
    good = synthetic_annotations(2)
    lines = [
        json.dumps(good[0].to_dict()),
        "{not json",
        json.dumps({"source": "x"}),
        json.dumps(good[0].to_dict()),
        json.dumps(good[1].to_dict()),
    ]
    (tmp_path / "annotations.jsonl").write_text("\n".join(lines) + "\n")
    loaded = load_annotations(tmp_path)
    assert [a.interview_id for a in loaded.annotations] == ["S000", "S001"]
    assert [r.row for r in loaded.rejected] == [2, 3, 4]
    assert loaded.rejected[2].reason == "duplicate id"
    with pytest.raises(FileNotFoundError):
        load_annotations(tmp_path / "missing")


def test_a_printed_p_needs_at_least_99_nulls_and_degenerate_nulls_are_flagged() -> None:
    from medagent.network.config import NetworkAnalysisConfig
    from medagent.network.nulls import summarise_null

    with pytest.raises(ValueError, match="99 null samples"):
        NetworkAnalysisConfig(modularity_null_samples=19)
    assert NetworkAnalysisConfig(kl_null_samples=0).sensitivity.null_samples == 99  # 0 = no p printed
    assert summarise_null(0.0, [0.0] * 99, "r00").degenerate
    assert not summarise_null(3.0, [1.0, 2.0, 4.0], "r1").degenerate


def test_the_phase_split_has_a_shuffled_position_null_and_orders_are_chosen_side_by_side() -> None:
    from medagent.network.flow import phase_null
    from medagent.network.markov import order_choices

    # Category a always first, b always last: the split is far above its shuffled-position null.
    seqs = [["a", "a", "b", "b"]] * 20
    obs, null = phase_null(seqs, ["a", "b"], 99, seed=0)
    assert null.size == 99 and obs > np.quantile(null, 0.99)

    class CV:
        accuracy = {0: 0.24, 1: 0.39, 2: 0.44, 3: 0.46}

    sel = {"aic_full": 3, "aic_observed": 3, "bic_full": 1, "bic_observed": 1}
    assert order_choices(sel, CV()) == "AIC 3 / 3; BIC 1 / 1; CV 3 (they disagree)"
