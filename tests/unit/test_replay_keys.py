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


def test_run_dirs_recorded_before_the_keys_existed_resume_as_whole_text_keys() -> None:
    old = {"eval": {"patient": "replay", "replay_threshold": 0.7}, "agent": {"mode": "amq"}}
    assert upgrade_history_config(old)["eval"]["replay_keys"] == "exchange"
    assert "replay_keys" not in old["eval"]
    assert upgrade_history_config({"agent": {"mode": "amq"}}) == {"agent": {"mode": "amq"}}
