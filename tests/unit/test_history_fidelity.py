"""Simulator fidelity by the lexicon: polarity of stated findings and disclosure of asked ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from medagent.history.evaluation.fidelity import FidelityScorer, add_lexical_fidelity, summarise
from medagent.history.evaluation.metrics import InterviewRecord, aggregate
from medagent.interview.transcripts import parse_transcript

SOURCE = parse_transcript(
    "D: What brings you in?\nP: I've had a cough for three days.\n"
    "D: Any fever?\nP: No, no fever.\n"
    "D: Any shortness of breath?\nP: Yes, when I climb stairs.\n",
    "T1",
)


@pytest.fixture(scope="module")
def scorer(data_root: Path) -> FidelityScorer:
    return FidelityScorer.from_data_root(str(data_root))


def test_the_source_is_read_with_the_annotators_conventions(scorer: FidelityScorer) -> None:
    truth = scorer.findings(SOURCE)
    assert truth == {"coughing": "positive", "fever": "negative", "dyspnea": "positive"}  # canonical names


def test_polarity_and_disclosure_counts(scorer: FidelityScorer) -> None:
    exchanges = [
        ("Do you have a cough?", "Yes, I have a cough."),  # asked, disclosed, agrees
        ("Have you had a fever?", "Yes, a high fever."),  # asked, disclosed, contradicts the source
        ("Any shortness of breath?", "I'm not sure."),  # asked, withheld
        ("Any chest pain?", "Yes, some chest pain."),  # the source never mentions it: beyond, not asked
    ]
    f = scorer.score(SOURCE, exchanges)
    assert (f.asked, f.disclosed, f.disclosed_agree) == (3, 2, 1)
    assert (f.stated, f.agree, f.contradict, f.beyond) == (3, 1, 1, 1)


def _record(interview_id: str, error: str | None = None) -> InterviewRecord:
    return InterviewRecord(interview_id, "fareez", "amq", "note", "ref", True, True, 1, 1, 0, 0.0, 0.0,
                           "complete", error=error)  # fmt: skip


def test_records_get_counts_and_the_run_gets_micro_rates(scorer: FidelityScorer) -> None:
    ok, failed, unlogged = _record("T1"), _record("T2", error="LLMError: 503"), _record("T3")
    log = {"simulator": [{"question": "Do you have a cough?", "answer": "Yes, a dry cough.", "context": ""}]}
    rows = {"T1": log, "T2": log, "T3": {"simulator": []}}
    add_lexical_fidelity([ok, failed, unlogged], rows, {"T1": SOURCE, "T2": SOURCE, "T3": SOURCE}, scorer)
    assert ok.fidelity_lexical is not None and ok.fidelity_lexical["asked"] == 1
    assert failed.fidelity_lexical is None and unlogged.fidelity_lexical is None
    agg = aggregate([ok, failed, unlogged])
    assert agg["sim_disclosure_rate"] == 1.0 and agg["sim_polarity_agreement"] == 1.0
    assert agg["sim_fidelity_n"] == 1


def test_summary_without_counts_is_empty_not_zero() -> None:
    s = summarise([None, {}])
    assert (
        s["sim_disclosure_rate"] is None and s["sim_polarity_agreement"] is None and s["sim_fidelity_n"] == 0
    )
    s = summarise(
        [{"asked": 4, "disclosed": 3, "disclosed_agree": 3}, {"asked": 1, "stated": 2, "beyond": 2}]
    )
    assert s["sim_disclosure_rate"] == 0.6 and s["sim_beyond_source"] == 1.0 and s["sim_fidelity_n"] == 2
