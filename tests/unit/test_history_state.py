"""The interview state: pure transitions, replay, serialisation, completeness and entropy math."""

import math

import pytest

from medagent.history.agent.phases import Rules, category_coverage, completeness, entropy
from medagent.history.agent.state import (
    SLOTS,
    Answered,
    Asked,
    AskedQuestion,
    Hypothesis,
    InterviewState,
    Phase,
    PhaseChanged,
    Updated,
    event_from_dict,
    event_to_dict,
    normalise_differential,
    replay,
    slots_of,
    transition,
)
from medagent.interview.order import load_priorities
from medagent.interview.types import INQUIRY_CATEGORIES
from tests.configs import history_agent_config


def _filled(*names: str) -> InterviewState:
    return transition(InterviewState(), Updated(facts=tuple((n, "x", "x") for n in names)))


def test_every_category_has_slots_and_every_slot_a_category() -> None:
    assert {s.category for s in SLOTS} == set(INQUIRY_CATEGORIES)
    assert len({s.name for s in SLOTS}) == len(SLOTS)


def test_transitions_are_pure_and_replayable() -> None:
    s0 = InterviewState()
    events = [
        Asked(AskedQuestion(0, "What brings you in?", "symptom", "triage")),
        Answered("A cough."),
        Updated(
            summary="Cough.",
            facts=(("symptom", "cough", "cough"),),
            differential=(Hypothesis("URTI", 1.0),),
            red_flags=("haemoptysis",),
        ),
        PhaseChanged(Phase.CONFIRMATION, "red flag"),
    ]
    states = replay(events, s0)
    assert s0 == InterviewState()  # never mutated
    final = states[-1]
    assert final.asked[0].answer == "A cough." and final.slots["symptom"].value == "cough"
    assert final.phase is Phase.CONFIRMATION and final.red_flags == ("haemoptysis",)
    assert states[1].pending is not None and states[2].pending is None
    # Round trips: states and events survive JSON-able dicts.
    assert InterviewState.from_dict(final.to_dict()) == final
    assert replay([event_from_dict(event_to_dict(e)) for e in events], s0) == states


def test_transition_rejects_answers_out_of_order() -> None:
    with pytest.raises(ValueError, match="no pending"):
        transition(InterviewState(), Answered("x"))
    s = transition(InterviewState(), Asked(AskedQuestion(0, "Q?", "symptom", "triage")))
    with pytest.raises(ValueError, match="already pending"):
        transition(s, Asked(AskedQuestion(1, "Q2?", "onset", "triage")))


def test_update_with_missing_fields_keeps_previous_values() -> None:
    s = transition(InterviewState(), Updated(summary="first", differential=(Hypothesis("a", 1.0),)))
    s2 = transition(s, Updated(errors=("bad",)))
    assert s2.summary == "first" and s2.differential == s.differential and s2.errors == ("bad",)


def test_completeness_is_weighted_category_coverage() -> None:
    weights = load_priorities().completeness_weights
    assert completeness(InterviewState(), weights) == 0.0
    assert completeness(_filled(*(s.name for s in SLOTS)), weights) == pytest.approx(1.0)
    # Half the symptom slots? symptom has 9 slots: 4 of them give 0.35 * 4 / 9.
    s = _filled("symptom", "onset", "duration", "severity")
    assert completeness(s, weights) == pytest.approx(0.35 * 4 / 9)
    # A one-slot category counts fully; a two-slot category half per slot.
    assert completeness(_filled("medication"), weights) == pytest.approx(0.10)
    assert completeness(_filled("allergies"), weights) == pytest.approx(0.15 / 2)
    assert category_coverage(_filled("occupation"))["exposure"] == 0.5
    assert set(slots_of("exposure")) == {"exposure", "occupation"}


def test_entropy_is_normalised() -> None:
    assert entropy(()) == 1.0
    assert entropy((Hypothesis("a", 1.0),)) == 0.0
    assert entropy((Hypothesis("a", 0.5), Hypothesis("b", 0.5))) == pytest.approx(1.0)
    three = (Hypothesis("a", 0.7), Hypothesis("b", 0.2), Hypothesis("c", 0.1))
    h = -(0.7 * math.log(0.7) + 0.2 * math.log(0.2) + 0.1 * math.log(0.1)) / math.log(3)
    assert entropy(three) == pytest.approx(h)
    assert entropy((Hypothesis("a", 1.0), Hypothesis("b", 0.0))) == 0.0


def test_normalise_differential_merges_ranks_and_rescales() -> None:
    dx = normalise_differential(
        [("COVID-19", 2, "r"), ("URTI", 1, ""), ("covid-19", 1, ""), ("x", -5, ""), ("", 3, "")], max_n=2
    )
    assert [h.diagnosis for h in dx] == ["COVID-19", "URTI"]
    assert [h.probability for h in dx] == pytest.approx([0.75, 0.25])
    flat = normalise_differential([("a", 0, ""), ("b", 0, "")], max_n=5)
    assert [h.probability for h in flat] == [0.5, 0.5]


def test_rules_read_both_priority_orders() -> None:
    paper = Rules.from_config(history_agent_config(priorities="paper"))
    phys = Rules.from_config(history_agent_config(priorities="physician"))
    pr = load_priorities()
    assert list(paper.order) == pr.priority_order and list(phys.order) == pr.empirical_order
    assert paper.order != phys.order and sum(paper.weights.values()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="priorities"):
        Rules.from_config(history_agent_config(priorities="nope"))
    with pytest.raises(ValueError, match="unknown slot"):
        Rules.from_config(history_agent_config(triage_slots=["symptom", "mood"]))
