"""The replay patient's keys: a question compared with each exchange's doctor text whole, or also with its
sentences and their tails after each comma (fillers and a second question in one turn cost nothing)."""

from __future__ import annotations

import asyncio

import pytest

from medagent.config.legacy import upgrade_history_config
from medagent.history.simulation.replay import (
    NO_ANSWER,
    ReplayPatient,
    exchange_keys,
    exchange_matches,
    transcript_exchanges,
)
from medagent.interview.transcripts import parse_transcript
from tests.unit._history_fakes import BagOfWordsEmbedder

IV = parse_transcript(
    "D: OK, OK, sure, great, thanks, and are you on any medications?\nP: Just metformin.\n"
    "D: OK. And how about work. What do you do?\nP: I drive a bus.\n",
    "T1",
)


def test_clause_keys_are_the_sentences_and_their_tails_after_each_comma() -> None:
    assert exchange_keys("OK, um. Do you smoke, or drink?") == ["OK, um. Do you smoke, or drink?"]
    assert exchange_keys("OK, um. Do you smoke, or drink?", "clauses") == [
        "OK, um. Do you smoke, or drink?", "OK, um.", "um.", "Do you smoke, or drink?", "or drink?",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="clauses"):
        exchange_keys("x", "words")


def test_fillers_cost_the_whole_text_key_a_match_that_a_clause_key_keeps() -> None:
    emb = BagOfWordsEmbedder()
    q = "Are you on any medications?"
    whole = ReplayPatient(IV.turns, emb, threshold=0.8)
    clauses = ReplayPatient(IV.turns, emb, threshold=0.8, keys="clauses")
    assert asyncio.run(whole.answer(q)) == NO_ANSWER
    assert asyncio.run(clauses.answer(q)) == "Just metformin."
    # The exchange scores its best key; the matrix form agrees with the patient's own match.
    xs = transcript_exchanges(IV.turns)
    sims = exchange_matches(emb, [q], xs, "clauses")
    assert sims.shape == (1, 2) and sims[0, 0] == pytest.approx(clauses.match(q)[1])
    assert sims[0, 0] > exchange_matches(emb, [q], xs)[0, 0]


def test_the_first_question_gets_the_opening_exchange_however_it_is_worded() -> None:
    """A transcript that opens with a greeting: matched by cosine, "what brings you in?" got "I don't
    know", and the opening-only baseline had nothing to summarise."""
    iv = parse_transcript(
        "D: How are you doing today?\nP: OK, I just have this cough that started last week.\n"
        "D: Any fever?\nP: No fever.\n",
        "T2",
    )
    opening = "Hello, what brings you in today?"
    by_match = ReplayPatient(iv.turns, BagOfWordsEmbedder(), threshold=0.8, keys="clauses")
    assert asyncio.run(by_match.answer(opening)) == NO_ANSWER
    patient = ReplayPatient(iv.turns, BagOfWordsEmbedder(), threshold=0.8, keys="clauses", opening=True)
    assert asyncio.run(patient.answer(opening)) == "OK, I just have this cough that started last week."
    assert patient.log[0].source_turns == (1,)
    # Only the first question: later ones are matched as before.
    assert asyncio.run(patient.answer(opening)) == NO_ANSWER
    assert asyncio.run(patient.answer("Any fever?")) == "No fever."
    # A greeting exchange loses to the opening that follows it, among the first three.
    greeted = parse_transcript(
        "D: How are you?\nP: Fine, thanks. And you?\nD: Well. What brings you in today?\nP: My knee hurts.\n"
        "D: Since when?\nP: Monday.\nD: Hello, what brings you in today?\nP: Never reached.\n",
        "T3",
    )
    patient = ReplayPatient(greeted.turns, BagOfWordsEmbedder(), threshold=0.99, opening=True)
    assert asyncio.run(patient.answer(opening)) == "My knee hurts."


def test_run_dirs_recorded_before_the_keys_existed_resume_as_whole_text_keys() -> None:
    old = {"eval": {"patient": "replay", "replay_threshold": 0.7}, "agent": {"mode": "amq"}}
    assert upgrade_history_config(old)["eval"]["replay_keys"] == "exchange"
    assert upgrade_history_config(old)["eval"]["replay_opening"] is False
    assert "replay_keys" not in old["eval"]
    assert upgrade_history_config({"agent": {"mode": "amq"}}) == {"agent": {"mode": "amq"}}


def test_left_out_answers_count_replies_when_the_asked_exchange_is_missing() -> None:
    from medagent.history.evaluation.replay_validation import left_out_answers

    emb = BagOfWordsEmbedder()
    # With its own exchange left out, no question matches the other one: every reply is "I don't know".
    assert left_out_answers({"T1": IV.turns}, emb, 0.8, "clauses", None) == {"T1": [False, False]}
    # At threshold -1 every question gets the other exchange's words.
    assert left_out_answers({"T1": IV.turns}, emb, -1.0, "exchange", None) == {"T1": [True, True]}


def test_paired_rates_pair_by_interview_and_holm_corrects_the_table() -> None:
    from medagent.history.evaluation.patient_validation import paired_rates, paired_rates_table

    a = {"i1": [True, True], "i2": [True, False], "i3": [False, False], "only_a": [True]}
    b = {"i1": [True, False], "i2": [False, False], "i3": [False, False], "empty": []}
    r = paired_rates("false not sure", "A", a, "B", b)
    assert r.n == 3 and r.mean_a == pytest.approx(0.5) and r.mean_b == pytest.approx(1 / 6)
    assert r.diff == pytest.approx(-1 / 3) and r.t_low is not None and r.t_low < r.diff < r.t_high
    # Two interviews differ, both the same way (the third by 0): 4 of the 8 sign patterns reach |mean|.
    assert r.p == pytest.approx(0.5)
    table = paired_rates_table([r, r])
    assert (
        "| false not sure | A | B | 3 | 0.500 | 0.167 | -0.333 |" in table and "| 0.5000 | 1.0000 |" in table
    )
