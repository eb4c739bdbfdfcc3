"""Redundancy control: verbatim, slot already filled, semantic (cosine >= 0.75); blocked questions are
replaced, counted, and never asked."""

import asyncio
import json
from typing import Any

import numpy as np
import pytest

from medagent.history import HistoryTakingAgent
from medagent.history.agent.redundancy import RedundancyChecker, cosine_matrix, redundant_share
from medagent.history.agent.state import Answered, Asked, AskedQuestion, InterviewState, Updated, transition
from tests.configs import history_agent_config
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever, ScriptedPatient


def _state() -> InterviewState:
    s = transition(
        InterviewState(),
        Asked(AskedQuestion(0, "Have you travelled anywhere recently?", "travel", "deep_dive")),
    )
    s = transition(s, Answered("No."))
    return transition(s, Updated(facts=(("medication", "none", "none"),)))


def test_checker_three_kinds() -> None:
    checker = RedundancyChecker(BagOfWordsEmbedder(), 0.75)
    s = _state()
    v = checker.check(s, "have you TRAVELLED anywhere, recently", "travel")
    assert v.reason == "verbatim"
    v = checker.check(s, "Are you on any pills?", "medication")
    assert v.reason == "slot_filled" and "none" in v.similar_to
    v = checker.check(s, "Recently, have you travelled anywhere?", "other")
    assert v.reason == "semantic" and v.similarity >= 0.75
    assert checker.check(s, "Do you smoke?", "habits").ok
    # Without an embedder the semantic check is off; the other two stay.
    plain = RedundancyChecker(None)
    assert plain.check(s, "Recently, have you travelled anywhere?", "other").ok
    assert plain.check(s, "Have you travelled anywhere recently?", "travel").reason == "verbatim"


def test_threshold_is_inclusive() -> None:
    class Fixed:
        def encode(self, texts: list[str]) -> np.ndarray:
            return np.array([[1.0, 0.0] if "a" in t else [0.75, np.sqrt(1 - 0.75**2)] for t in texts])

    s = transition(InterviewState(), Asked(AskedQuestion(0, "a?", "symptom", "triage", "x")))
    assert RedundancyChecker(Fixed(), 0.75).check(s, "b?", "onset").reason == "semantic"
    assert RedundancyChecker(Fixed(), 0.76).check(s, "b?", "onset").ok


def _run(fake: FakeClinician, **cfg: Any) -> Any:
    agent = HistoryTakingAgent(fake.model, history_agent_config(**cfg), FakeRetriever(), BagOfWordsEmbedder())
    return asyncio.run(agent.run(ScriptedPatient()))


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        # The model repeats the opening question word for word.
        ({"question": "Hello, what brings you in today?", "slot": "onset"}, "verbatim"),
        # The model drifts to the slot the opening answer already filled.
        ({"question": "What symptoms do you have?", "slot": "symptom"}, "slot_filled"),
        # A reworded repeat of the opening question.
        ({"question": "Today, what brings you in, hello?", "slot": "onset"}, "semantic"),
    ],
)
def test_blocked_question_is_replaced_and_counted(override: dict[str, str], reason: str) -> None:
    calls: list[str] = []

    def question(slot: str, user: str) -> dict[str, str] | None:
        calls.append(slot)
        return override if len(calls) == 1 else None  # only the first proposal is redundant

    result = _run(FakeClinician(question_override=question), max_turns=2)
    s = result.final_state
    assert [b.reason for b in s.blocked] == [reason] and result.blocked == 1
    assert s.asked[1].text != s.blocked[0].text  # never asked in its place
    assert result.turns[1].blocked == 1
    # Replacement: the same slot rephrased (the model is told why its proposal was refused).
    assert calls == ["onset", "onset"] and result.turns[1].slot == "onset"


def test_a_repeated_refused_question_is_replaced_by_the_slots_plain_question() -> None:
    prompts: list[str] = []

    def always_repeat(slot: str, user: str) -> dict[str, str]:
        prompts.append(user)
        return {"question": "Hello, what brings you in today?", "slot": slot}

    result = _run(FakeClinician(question_override=always_repeat), max_turns=3, max_replacements=3)
    s = result.final_state
    assert "was refused (verbatim)" in prompts[1] and "was refused" not in prompts[0]
    # Turn 1: refused once, then the model repeats it: "onset"'s own question is asked instead.
    assert [b.slot for b in s.blocked if b.turn == 1] == ["onset"] and s.asked[1].text == "When did it start?"
    assert all(b.reason == "verbatim" for b in s.blocked) and result.n_turns == 3
    assert any("repeated a refused question" in e for e in result.errors)


def test_rephrase_then_next_slot_then_give_up() -> None:
    def always_repeat(slot: str, user: str) -> dict[str, str]:
        return {"question": "Hello, what brings you in today?", "slot": slot}

    # No replacement allowed: the one refused proposal ends the interview.
    result = _run(FakeClinician(question_override=always_repeat), max_turns=5, max_replacements=0)
    assert [b.reason for b in result.final_state.blocked] == ["verbatim"]
    assert result.finish_reason == "no acceptable question left" and result.n_turns == 1
    assert result.to_dict()["blocked"] == 1


def test_redundant_share_and_cosine() -> None:
    e = BagOfWordsEmbedder()
    qs = ["Do you smoke?", "Any fever?", "do you smoke", "Fever, any?"]
    assert redundant_share(qs, None, 0.75) == 0.25
    assert redundant_share(qs, e, 0.75) == 0.5
    assert redundant_share([], e, 0.75) == 0.0
    m = cosine_matrix(np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([[2.0, 0.0]]))
    assert m.tolist() == [[1.0], [0.0]]
    json.dumps(m.tolist())
