"""The phase machine: completeness and entropy thresholds, red-flag escalation, completion reasons."""

from dataclasses import replace

from medagent.config import HistoryAgentConfig
from medagent.history.phases import Rules, eligible_slots, finish_reason, next_phase
from medagent.history.state import (
    SLOTS,
    Asked,
    AskedQuestion,
    Hypothesis,
    InterviewState,
    Phase,
    Updated,
    transition,
)

RULES = Rules.from_config(HistoryAgentConfig())
FLAT = (Hypothesis("a", 0.34), Hypothesis("b", 0.33), Hypothesis("c", 0.33))
SHARP = (Hypothesis("a", 0.97), Hypothesis("b", 0.02), Hypothesis("c", 0.01))


def _state(*slots: str, phase: Phase = Phase.TRIAGE, dx: tuple[Hypothesis, ...] = FLAT) -> InterviewState:
    s = transition(InterviewState(), Updated(facts=tuple((n, "x") for n in slots), differential=dx))
    return replace(s, phase=phase)


def test_triage_moves_on_completeness() -> None:
    assert next_phase(_state("symptom", "onset"), RULES) is None
    move = next_phase(_state("symptom", "onset", "duration", "severity"), RULES)
    assert move is not None and move[0] is Phase.HYPOTHESIS_FORMATION and "C=" in move[1]


def test_triage_moves_on_when_its_slots_are_exhausted() -> None:
    s = _state("symptom")
    for i, slot in enumerate(("onset", "duration", "severity")):
        s = transition(s, Asked(AskedQuestion(i, f"{slot}?", slot, "triage", answer="don't know")))
    assert eligible_slots(s, RULES) == []
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
    move = next_phase(_state(*rich, phase=dd), RULES)  # C = 0.35 + 0.15 + 0.10 + 0.06 + 0.04 = 0.70
    assert move is not None and move[0] is Phase.CONFIRMATION
    sharp = next_phase(_state(*symptoms, phase=dd, dx=SHARP), RULES)
    assert sharp is not None and "entropy" in sharp[1]


def test_red_flag_jumps_to_confirmation_from_any_phase() -> None:
    for phase in (Phase.TRIAGE, Phase.HYPOTHESIS_FORMATION, Phase.DEEP_DIVE):
        s = transition(_state(phase=phase), Updated(red_flags=("haemoptysis",)))
        move = next_phase(s, RULES)
        assert move is not None and move[0] is Phase.CONFIRMATION and "haemoptysis" in move[1]
    assert next_phase(_state(phase=Phase.CONFIRMATION), RULES) is None


def test_phase_restricts_eligible_slots_in_priority_order() -> None:
    s = _state("symptom")
    assert eligible_slots(s, RULES) == ["onset", "duration", "severity"]
    hf = eligible_slots(replace(s, phase=Phase.HYPOTHESIS_FORMATION), RULES)
    assert hf[:2] == ["onset", "duration"] and "habits" not in hf and "medication" in hf
    dd_paper = eligible_slots(replace(s, phase=Phase.DEEP_DIVE), RULES)
    phys = Rules.from_config(HistoryAgentConfig(priorities="physician"))
    dd_phys = eligible_slots(replace(s, phase=Phase.DEEP_DIVE), phys)
    assert set(dd_paper) == set(dd_phys) and dd_paper != dd_phys
    # paper: family history before habits; physician order: family history, then habit before exposure.
    assert dd_paper.index("family_history") < dd_paper.index("habits")
    assert dd_phys.index("habits") < dd_phys.index("exposure") < dd_phys.index("basic_information")
    assert dd_paper[-1] == "basic_information"


def test_finish_reasons() -> None:
    cfg = HistoryAgentConfig(max_turns=2)
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
