"""Annotation metrics on a hand-made case; the run dir's JSONL commit log; config composition."""

import csv
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from medagent.config import AnnotateRunConfig
from medagent.interview.annotate.evaluate import PRF, macro, micro, score_annotations, write_report
from medagent.interview.types import Annotation, QuestionAnnotation
from medagent.run import RunDir

REPO = Path(__file__).resolve().parents[2]


def _q(turn: int, category: str) -> QuestionAnnotation:
    return QuestionAnnotation(turn=turn, text="?", category=category)


GOLDS = {
    "a": Annotation(
        "a",
        "meditod",
        "gold",
        ["cough", "fever"],
        ["chills"],
        ["asthma"],
        [_q(0, "symptom"), _q(2, "symptom"), _q(4, "habit")],
    ),
    "b": Annotation("b", "meditod", "gold", ["dyspnea"], [], [], [_q(1, "travel")]),
}
PREDS = {
    "a": Annotation(
        "a",
        "meditod",
        "lexicon",
        ["cough", "chills"],
        ["fever", "chills"],
        ["asthma", "copd"],
        [_q(0, "symptom"), _q(2, "habit"), _q(6, "symptom")],
    ),
    # "b" is missing: every gold item of "b" counts as a false negative.
}


def test_findings_are_set_comparisons_summed_over_interviews() -> None:
    report = score_annotations(PREDS, GOLDS, "t")
    rows = {r.label: r for r in report.findings}
    assert (rows["positive"].tp, rows["positive"].fp, rows["positive"].fn) == (1, 1, 2)
    assert (rows["negative"].tp, rows["negative"].fp, rows["negative"].fn) == (1, 1, 0)
    assert (rows["diagnosis"].tp, rows["diagnosis"].fp, rows["diagnosis"].fn) == (1, 1, 0)
    assert rows["positive"].precision == 0.5 and rows["positive"].recall == pytest.approx(1 / 3)
    assert rows["positive"].f1 == pytest.approx(0.4)


def test_questions_aligned_by_turn() -> None:
    report = score_annotations(PREDS, GOLDS, "t")
    rows = {r.label: r for r in report.questions}
    # symptom: turn 0 right; turn 2 gold symptom predicted habit (FN); turn 6 predicted, not a gold question (FP)
    assert (rows["symptom"].tp, rows["symptom"].fp, rows["symptom"].fn) == (1, 1, 1)
    # habit: turn 2 predicted habit wrongly (FP); turn 4 gold habit not detected (FN)
    assert (rows["habit"].tp, rows["habit"].fp, rows["habit"].fn) == (0, 1, 1)
    assert (rows["travel"].tp, rows["travel"].fp, rows["travel"].fn) == (0, 0, 1)  # interview b missing
    d = report.detection
    assert (d.tp, d.fp, d.fn) == (2, 1, 2)


def test_micro_and_macro_averages() -> None:
    rows = [PRF("x", 3, 1, 0), PRF("y", 0, 1, 1), PRF("unused")]
    m = micro(rows)
    assert (m.precision, m.recall) == (0.6, 0.75)
    a = macro(rows)  # "unused" has no gold and no prediction: not averaged
    assert a.precision == pytest.approx(0.375) and a.f1 == pytest.approx((6 / 7) / 2)


def test_report_files(tmp_path: Path) -> None:
    report = score_annotations(PREDS, GOLDS, "t")
    write_report(report, tmp_path / "e.md", tmp_path / "e.csv", ["### Extra\nnote"])
    md = (tmp_path / "e.md").read_text()
    assert "| positive | 0.500 | 0.333 | 0.400 | 1 | 1 | 2 |" in md
    assert "| disease | n/a | n/a | n/a | 0 | 0 | 0 |" in md and "### Extra" in md and "### Scoring" in md
    rows = list(csv.DictReader((tmp_path / "e.csv").open()))
    assert {r["label"] for r in rows} >= {
        "positive",
        "findings micro",
        "categories macro",
        "question detection",
    }
    assert next(r for r in rows if r["label"] == "disease")["f1"] == ""  # no gold, no prediction: no rate


def test_jsonl_commit_log_dedupes_and_survives_a_cut_line(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    assert (
        rd.append_records(rd.annotations, [{"interview_id": "a"}, {"interview_id": "b"}], key="interview_id")
        == 2
    )
    with open(rd.annotations, "a") as f:
        f.write('{"interview_id": "c", "posi')  # killed mid-write
    assert rd.completed_keys(rd.annotations, "interview_id") == {"a", "b"}
    assert (
        rd.append_records(rd.annotations, [{"interview_id": "b"}, {"interview_id": "c"}], key="interview_id")
        == 1
    )
    assert [r["interview_id"] for r in rd.load_records(rd.annotations)] == ["a", "b", "c"]


@pytest.mark.parametrize("annotator", ["lexicon", "llm"])
def test_config_composes(annotator: str) -> None:
    import pipelines.annotate_interviews  # noqa: F401  (registers annotate_schema)

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            "annotate_interviews",
            overrides=[f"annotator={annotator}", "interviews=meditod_sample", "limit=2"],
        )
    run_cfg: AnnotateRunConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    assert (
        run_cfg.annotator.kind == annotator and run_cfg.interviews.source == "meditod" and run_cfg.limit == 2
    )
    assert run_cfg.llm.name == "qwen2.5-coder-1.5b-cpu"
