"""The grounding check: a slot value or red flag enters the state only with the patient's sure words that
express its concept, and every refusal is in the state and the trace."""

from __future__ import annotations

import asyncio
import json

import pytest

from medagent.history import HistoryTakingAgent
from medagent.history.agent.grounding import Grounding
from medagent.history.agent.preprocess import parse_update
from medagent.history.agent.state import InterviewState
from tests.configs import history_agent_config
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever, ScriptedPatient

CFG = history_agent_config()
SAID = [
    "I've had a cough for three days.",
    "I'm not sure when it started.",
    "It has lasted about two weeks.",
    "No allergies.",
    "I coughed up some blood this morning.",
]


@pytest.fixture(scope="module")
def grounding() -> Grounding:
    return Grounding(BagOfWordsEmbedder(), CFG.red_flags, 0.2, 3)


@pytest.mark.parametrize(
    ("flag", "quote", "why"),
    [
        ("haemoptysis", "coughed up some blood", None),
        ("haemoptysis", "a cough for three days", "does not express haemoptysis"),  # said, but not blood
        ("haemoptysis", "blood in my phlegm", "not in the patient's words"),
        ("weight_loss", "", "no quote"),
    ],
)
def test_a_red_flag_needs_a_quote_that_expresses_it(
    grounding: Grounding, flag: str, quote: str, why: str | None
) -> None:
    got = grounding.check_flag(flag, quote, SAID)
    assert got is None if why is None else why in str(got)


@pytest.mark.parametrize(
    ("slot", "quote", "why"),
    [
        ("symptom", "a cough for three days", None),
        ("duration", "It has lasted about two weeks", None),
        ("allergies", "No allergies", None),  # a denial is a fact
        ("onset", "I'm not sure when it started", "unsure"),  # "not sure" fills nothing
        ("symptom", "I'm not sure", "unsure"),
        ("duration", "for two weeks", "not in the patient's words"),  # the model's paraphrase
        ("symptom", "It has lasted about two weeks", "names no symptom"),
        ("occupation", "No allergies", "does not express occupation"),
    ],
)
def test_a_slot_value_needs_a_quote_that_expresses_the_slot(
    grounding: Grounding, slot: str, quote: str, why: str | None
) -> None:
    got = grounding.check_slot(slot, quote, SAID)
    assert got is None if why is None else why in str(got)


def test_parse_update_records_refusals_and_keeps_grounded_values(grounding: Grounding) -> None:
    reply = {
        "summary_add": "Cough.",
        "slot_updates": [
            {"slot": "symptom", "value": "cough", "quote": "a cough for three days"},
            {"slot": "severity", "value": "moderate", "quote": "moderate"},  # never said
        ],
        "differential": [],
        "red_flags": [{"id": "haemoptysis", "quote": "a cough for three days"}],
        "route": "question",
    }
    u = parse_update(reply, CFG, SAID, grounding, previous_summary="Adult.")
    assert u.facts == (("symptom", "cough", "a cough for three days"),)
    assert u.summary == "Adult. Cough." and u.differential is None  # [] = unchanged
    assert {(r.kind, r.name) for r in u.refused} == {("slot", "severity"), ("red_flag", "haemoptysis")}
    assert u.red_flags == ()


def test_refusals_are_in_the_state_and_the_trace() -> None:
    def update(turn: int) -> str | None:
        if turn != 1:
            return None
        return json.dumps(
            {
                "summary_add": "",
                "slot_updates": [{"slot": "onset", "value": "none", "quote": "I'm not sure"}],
                "differential": [],
                "red_flags": [{"id": "haemoptysis", "quote": "I have a cough"}],
                "route": "question",
            }
        )

    fake = FakeClinician(update_override=update)
    agent = HistoryTakingAgent(
        fake.model, history_agent_config(max_turns=3), FakeRetriever(), BagOfWordsEmbedder()
    )
    patient = ScriptedPatient({"onset": "I'm not sure."}, opening="I have a cough and a fever.")
    result = asyncio.run(agent.run(patient))
    s = result.final_state
    assert "onset" not in s.slots and "haemoptysis" not in s.red_flags
    assert [(r.name, r.turn) for r in s.refused if r.turn == 1] == [("onset", 1), ("haemoptysis", 1)]
    trace = result.to_dict()
    refused = [r for e in trace["events"][:6] if e["kind"] == "updated" for r in e["refused"]]
    assert {r["reason"] for r in refused} == {
        "the patient was unsure",
        "the quote does not express haemoptysis (hemoptysis)",
    }
    assert InterviewState.from_dict(trace["final_state"]).refused == s.refused
