"""The history-taking agent end to end with a scripted clinician model and a scripted patient."""

import asyncio
import json
from typing import Any

import pytest

from medagent.history import HistoryTakingAgent, SingleShotBaseline, build_history_agent
from medagent.history.agent.state import Phase, replay
from medagent.llm.base import LLMError
from tests.configs import history_agent_config
from tests.unit._history_fakes import (
    EQUAL_DX,
    BagOfWordsEmbedder,
    FakeClinician,
    FakeRetriever,
    ScriptedPatient,
)


def _run(agent: Any, patient: Any, **kw: Any) -> Any:
    return asyncio.run(agent.run(patient, **kw))


def _agent(fake: FakeClinician, **cfg: Any) -> tuple[HistoryTakingAgent, FakeRetriever]:
    retriever = FakeRetriever()
    agent = HistoryTakingAgent(fake.model, history_agent_config(**cfg), retriever, BagOfWordsEmbedder())
    return agent, retriever


def test_full_run_walks_all_four_phases_in_order() -> None:
    fake = FakeClinician()
    agent, retriever = _agent(fake, max_turns=30)
    result = _run(agent, ScriptedPatient())
    phases = [t.phase for t in result.turns]
    order = [p.value for p in Phase]
    seen = list(dict.fromkeys(phases))
    assert seen == order  # triage -> hypothesis formation -> deep dive -> confirmation, never back
    assert phases[0] == "triage" and result.turns[0].slot == "symptom"
    assert result.finish_reason == "confirmation done"
    # Triage asks only the chief-complaint slots; deep dive reaches non-clinical categories.
    assert {t.slot for t in result.turns if t.phase == "triage"} <= {
        "symptom",
        "onset",
        "duration",
        "severity",
    }
    assert sum(t.phase == "confirmation" for t in result.turns) == 2
    # Completeness never decreases; the state log has one state per turn plus the initial one.
    cs = [t.completeness for t in result.turns]
    assert cs == sorted(cs) and len(result.states) == len(result.turns) + 1
    # Replay of the event log rebuilds the final state exactly, without the model.
    assert replay(result.events)[-1] == result.final_state
    # Completion: retrieval with the summary, parent-child hybrid; the assessment cites the given passage only.
    assert retriever.calls == [
        {"query": "Adult with cough and fever for three days.", "top_k": 5, "sources": None, "mode": "hybrid",
         "return_parents": True}
    ]  # fmt: skip
    a = result.assessment
    assert a.valid and a.grounded and a.differential[0].citations == ("g1#p0",)
    assert any("bogus-id" in e for e in a.errors)
    assert "covid swab" in a.text()
    d = result.to_dict()
    json.dumps(d)
    assert d["n_turns"] == len(result.turns) and d["usage"]["llm_calls"] > 0


@pytest.mark.parametrize("budget", [1, 3, 6])
def test_terminates_within_the_turn_budget(budget: int) -> None:
    result = _run(_agent(FakeClinician(), max_turns=budget)[0], ScriptedPatient())
    assert result.n_turns == budget and "budget" in result.finish_reason


def test_red_flag_escalates_to_confirmation() -> None:
    patient = ScriptedPatient(opening="A cough, and this morning I coughed up blood.")
    result = _run(_agent(FakeClinician(), max_turns=30)[0], patient)
    assert result.turns[0].phase_after == "confirmation" and result.final_state.red_flags == ("haemoptysis",)
    assert [t.phase for t in result.turns[1:]] == ["confirmation", "confirmation"]
    assert result.finish_reason == "confirmation done" and result.n_turns == 3
    assert all(t.slot == "other" for t in result.turns[1:])


def test_physician_order_changes_what_is_asked() -> None:
    def slots(priorities: str) -> list[str]:
        r = _run(_agent(FakeClinician(), max_turns=30, priorities=priorities)[0], ScriptedPatient())
        return [t.slot for t in r.turns]

    paper, physician = slots("paper"), slots("physician")
    # From the second question on (gating by phase used to make the first 14 questions identical).
    assert paper[:4] == ["symptom", "onset", "duration", "severity"]
    assert physician[:3] == ["symptom", "basic_information", "onset"]


def test_malformed_update_is_retried_recorded_and_survived() -> None:
    fake = FakeClinician(update_override=lambda turn: "I think it is a cold." if turn < 2 else None)
    result = _run(_agent(fake, max_turns=3)[0], ScriptedPatient())
    # Turn 0: both attempts malformed -> nothing extracted, errors kept; later turns work.
    assert "symptom" not in result.final_state.slots or result.final_state.slots["symptom"].turn > 0
    assert any("malformed" in e for e in result.final_state.errors)
    assert any("no usable reply" in e for e in result.errors)
    assert result.n_turns == 3


def test_partially_malformed_update_keeps_the_good_fields() -> None:
    bad = json.dumps(
        {
            "summary_add": 5,
            "slot_updates": [
                {"slot": "symptom", "value": "cough", "quote": "a cough"},
                {"slot": "mood", "value": "x"},
                "junk",
            ],
            "differential": "flu",
            "red_flags": ["made_up"],
            "route": "later",
        }
    )
    fake = FakeClinician(update_override=lambda turn: bad if turn == 0 else None)
    result = _run(_agent(fake, max_turns=1)[0], ScriptedPatient())
    s = result.final_state
    assert s.slots["symptom"].value == "cough" and s.differential == () and s.red_flags == ()
    joined = " ".join(s.errors)
    for what in ("summary_add", "mood", "junk", "differential", "made_up", "route"):
        assert what in joined


def test_malformed_question_falls_back_to_the_plain_slot_question() -> None:
    fake = FakeClinician(question_override=lambda slot, user: "Sure! Let me think.")
    result = _run(_agent(fake, max_turns=2)[0], ScriptedPatient())
    assert result.turns[1].question == "When did it start?"
    assert any("question (onset)" in e for e in result.errors)


def test_malformed_assessment_is_invalid_not_guessed() -> None:
    result = _run(_agent(FakeClinician(assessment_reply="no idea"), max_turns=1)[0], ScriptedPatient())
    assert not result.assessment.valid and result.assessment.text() == ""


def test_endpoint_failure_propagates() -> None:
    class Broken(FakeClinician):
        def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
            raise LLMError("503")

    with pytest.raises(LLMError):
        _run(_agent(Broken(), max_turns=2)[0], ScriptedPatient())


def test_step_api_lets_a_person_play_the_patient() -> None:
    agent, _ = _agent(FakeClinician(), max_turns=3)

    async def session() -> Any:
        state = agent.start()
        state, q = await agent.next_question(state)
        assert q is not None and q.text == agent.cfg.opening_question and state.pending == q
        with pytest.raises(ValueError, match="observe"):
            await agent.next_question(state)
        state = await agent.observe(state, "  I have a   cough. ")
        assert state.asked[0].answer == "I have a cough." and "symptom" in state.slots
        while True:
            state, q = await agent.next_question(state)
            if q is None:
                break
            state = await agent.observe(state, "I don't know")
        return state, await agent.finish(state)

    state, assessment = asyncio.run(session())
    assert state.turn == 3 and assessment.valid


def test_build_history_agent_and_single_shot_baseline() -> None:
    fake = FakeClinician()
    amq = build_history_agent(history_agent_config(), fake.model, embedder=BagOfWordsEmbedder())
    assert isinstance(amq, HistoryTakingAgent)
    with pytest.raises(ValueError, match="embedder"):  # slot values are grounded with it
        build_history_agent(history_agent_config(), fake.model)
    base = build_history_agent(history_agent_config(mode="single_shot"), fake.model)
    assert isinstance(base, SingleShotBaseline)
    with pytest.raises(ValueError, match="mode"):
        build_history_agent(history_agent_config(mode="x"), fake.model)
    result = asyncio.run(base.run(None, transcript="Doctor: What brings you in?\nPatient: A cough."))
    assert result.mode == "single_shot" and result.n_turns == 1 and not result.assessment.grounded
    assert result.assessment.valid and result.assessment.differential[0].citations == ()
    sent = [r for r in fake.model.requests if "A cough." in json.dumps(r)]
    assert sent and not any("PASSAGE id=" in json.dumps(r) for r in fake.model.requests)
    # No transcript: the baseline asks the opening question once.
    patient = ScriptedPatient()
    r2 = asyncio.run(base.run(patient))
    assert patient.questions == [history_agent_config().opening_question] and r2.final_state.turn == 1


def test_low_entropy_differential_shortens_hypothesis_formation() -> None:
    sharp = [
        {"diagnosis": "COVID-19", "probability": 0.97, "reason": ""},
        {"diagnosis": "URTI", "probability": 0.03, "reason": ""},
    ]
    fast = _run(_agent(FakeClinician(differential=lambda t: sharp), max_turns=30)[0], ScriptedPatient())
    slow = _run(_agent(FakeClinician(differential=lambda t: EQUAL_DX), max_turns=30)[0], ScriptedPatient())
    assert fast.n_turns < slow.n_turns
