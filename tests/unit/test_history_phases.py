"""The phase machine: completeness and entropy thresholds, red-flag escalation, completion reasons."""

from dataclasses import replace

from medagent.history.agent.phases import Rules, eligible_slots, finish_reason, next_phase, phase_slots_left
from medagent.history.agent.state import (
    SLOT_BY_NAME,
    SLOTS,
    Asked,
    AskedQuestion,
    Hypothesis,
    InterviewState,
    Phase,
    Updated,
    transition,
)
from medagent.interview.types import INQUIRY_CATEGORIES
from tests.configs import history_agent_config

RULES = Rules.from_config(history_agent_config())
FLAT = (Hypothesis("a", 0.34), Hypothesis("b", 0.33), Hypothesis("c", 0.33))
SHARP = (Hypothesis("a", 0.97), Hypothesis("b", 0.02), Hypothesis("c", 0.01))


def _state(*slots: str, phase: Phase = Phase.TRIAGE, dx: tuple[Hypothesis, ...] = FLAT) -> InterviewState:
    s = transition(InterviewState(), Updated(facts=tuple((n, "x", "x") for n in slots), differential=dx))
    return replace(s, phase=phase)


def test_triage_moves_on_completeness() -> None:
    assert next_phase(_state("symptom", "onset"), RULES) is None
    move = next_phase(_state("symptom", "onset", "duration", "severity"), RULES)
    assert move is not None and move[0] is Phase.HYPOTHESIS_FORMATION and "C=" in move[1]


def test_triage_moves_on_when_its_slots_are_exhausted() -> None:
    s = _state("symptom")
    for i, slot in enumerate(("onset", "duration", "severity")):
        s = transition(s, Asked(AskedQuestion(i, f"{slot}?", slot, "triage", answer="don't know")))
    # Other slots are still missing (phases no longer gate them), but none of Triage's own.
    assert "medication" in eligible_slots(s, RULES) and not phase_slots_left(s, RULES)
    assert next_phase(s, RULES) == (Phase.HYPOTHESIS_FORMATION, "no triage slot left")


def test_hypothesis_formation_moves_on_completeness_or_low_entropy() -> None:
    symptoms = [s.name for s in SLOTS if s.category == "symptom"]
    hf = Phase.HYPOTHESIS_FORMATION
    assert next_phase(_state(*symptoms[:5], phase=hf), RULES) is None
    by_c = next_phase(_state(*symptoms, phase=hf), RULES)  # C = 0.35 >= 0.35
    assert by_c is not None and by_c[0] is Phase.DEEP_DIVE and "C=" in by_c[1]
    by_h = next_phase(_state(*symptoms[:5], phase=hf, dx=SHARP), RULES)
    assert by_h is not None and by_h[0] is Phase.DEEP_DIVE and "entropy" in by_h[1]
    # No differential yet: entropy 1, no move on C either.
    assert next_phase(_state(*symptoms, phase=hf, dx=()), RULES) is None


def test_deep_dive_moves_to_confirmation() -> None:
    dd = Phase.DEEP_DIVE
    symptoms = [s.name for s in SLOTS if s.category == "symptom"]
    assert next_phase(_state(*symptoms, "medication", phase=dd), RULES) is None
    rich = [*symptoms, "medical_history", "allergies", "medication", "medical_tests", "patient_concerns"]
    # C = 0.35 + 0.15 + 0.10 + 0.06 + 0.04 = 0.70, but social history was never asked: the first pass is not
    # done (test_confirmation_on_completeness_waits_for_the_first_pass); with it, Confirmation.
    assert next_phase(_state(*rich, phase=dd), RULES) is None
    social = [
        "family_history",
        "habits",
        "exposure",
        "occupation",
        "residence",
        "travel",
        "basic_information",
    ]
    move = next_phase(_state(*rich, *social, phase=dd), RULES)
    assert move is not None and move[0] is Phase.CONFIRMATION
    sharp = next_phase(_state(*symptoms, phase=dd, dx=SHARP), RULES)
    assert sharp is not None and "entropy" in sharp[1]


def test_red_flag_jumps_to_confirmation_from_any_phase() -> None:
    for phase in (Phase.TRIAGE, Phase.HYPOTHESIS_FORMATION, Phase.DEEP_DIVE):
        s = transition(_state(phase=phase), Updated(red_flags=("haemoptysis",)))
        move = next_phase(s, RULES)
        assert move is not None and move[0] is Phase.CONFIRMATION and "haemoptysis" in move[1]
    assert next_phase(_state(phase=Phase.CONFIRMATION), RULES) is None


def test_phase_does_not_gate_the_order() -> None:
    s = _state("symptom")
    phys = Rules.from_config(history_agent_config(priorities="physician"))
    for phase in Phase:
        paper = eligible_slots(replace(s, phase=phase), RULES)
        assert paper == eligible_slots(s, RULES)  # the same candidates, in the same order, in every phase
        # The physician order asks basic information next, from Triage on (gating made it wait for Deep Dive).
        assert eligible_slots(replace(s, phase=phase), phys)[0] == "basic_information"
    assert paper[:3] == ["onset", "duration", "severity"] and paper[3] == "medical_history"


def test_passes_put_every_category_before_the_symptom_details() -> None:
    names = eligible_slots(_state(), RULES)
    first = names[:16]
    assert {SLOT_BY_NAME[n].category for n in first} == set(INQUIRY_CATEGORIES)
    assert names[16:] == ["character", "location", "progression", "aggravating_factors", "relieving_factors"]
    assert first[-1] == "basic_information"  # paper: basic information last, within the pass
    strict = Rules.from_config(history_agent_config(slots_per_pass=None))
    assert eligible_slots(_state(), strict)[:9] == [s.name for s in SLOTS if s.category == "symptom"]


def test_confirmation_on_completeness_waits_for_the_first_pass() -> None:
    dd = Phase.DEEP_DIVE
    symptoms = ["symptom", "onset", "duration", "severity"]
    rest = [s.name for s in SLOTS if s.category != "symptom"]
    # C = 0.156 + 0.55 >= 0.7 but habits and basic information were never asked: stay in Deep Dive.
    almost = [n for n in rest if n not in ("habits", "basic_information")]
    assert next_phase(_state(*symptoms, *almost, phase=dd), RULES) is None
    move = next_phase(_state(*symptoms, *rest, phase=dd), RULES)
    assert move is not None and move[0] is Phase.CONFIRMATION and "C=" in move[1]


def test_finish_reasons() -> None:
    cfg = history_agent_config(max_turns=2)
    rules = Rules.from_config(cfg)
    s = InterviewState()
    assert finish_reason(s, rules) is None
    for i in range(2):
        s = transition(s, Asked(AskedQuestion(i, f"q{i}", "symptom", "triage", answer="a")))
    assert "budget" in str(finish_reason(s, rules))
    full = _state(*(x.name for x in SLOTS))
    assert "complete" in str(finish_reason(full, RULES))
    conf = replace(_state(phase=Phase.CONFIRMATION), confirmation_asked=2)
    assert finish_reason(conf, RULES) == "confirmation done"
    routed = replace(
        _state(*(x.name for x in SLOTS[:12])),
        route="retrieve",
        asked=(AskedQuestion(0, "q", "symptom", "triage", "a"),),
    )
    assert "router" in str(finish_reason(routed, RULES))
