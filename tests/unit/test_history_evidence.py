"""Evidence on the agent side: red flags kept only with the patient's affirmed words; repeated questions
measured by a lexical check that shares nothing with the blocking control."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from medagent.history import HistoryTakingAgent
from medagent.history.agent.grounding import Grounding
from medagent.history.agent.preprocess import parse_update
from medagent.history.evaluation.metrics import add_lexical_repeats
from medagent.history.evaluation.repeats import TopicRepeats
from tests.configs import history_agent_config
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever, ScriptedPatient
from tests.unit.test_history_comparison import _rec

CFG = history_agent_config()
GROUNDING = Grounding(BagOfWordsEmbedder(), CFG.red_flags, 0.2, 3)
SAID = ["I've had a cough for a week.", "I coughed up some blood this morning.", "No chest pain at all."]


@pytest.mark.parametrize(
    ("flag", "kept", "why"),
    [
        ({"id": "haemoptysis", "quote": "coughed up some blood"}, True, ""),
        ({"id": "haemoptysis", "quote": "blood in my phlegm"}, False, "not in the patient's words"),
        ({"id": "chest_pain_dyspnoea", "quote": "chest pain"}, False, "denied"),
        ("haemoptysis", False, "no quote"),  # v1 reply: a bare id, no evidence
        ({"id": "haemoptysis", "quote": "a cough for a week"}, False, "does not express haemoptysis"),
        ({"id": "made_up", "quote": "coughed up some blood"}, False, "unknown red flag"),
    ],
)
def test_update_keeps_a_red_flag_only_with_the_patients_affirmed_words(
    flag: object, kept: bool, why: str
) -> None:
    u = parse_update({"red_flags": [flag]}, CFG, SAID, GROUNDING)
    assert (len(u.red_flags) == 1) is kept
    assert kept or any(why in e for e in u.errors) or any(why in r.reason for r in u.refused)


def test_a_denied_red_flag_never_reaches_the_agents_state() -> None:
    def run(answer: str) -> tuple[str, ...]:
        fake = FakeClinician()  # flags haemoptysis, quoting the whole answer, whenever it mentions blood
        agent = HistoryTakingAgent(
            fake.model, history_agent_config(max_turns=4), FakeRetriever(), BagOfWordsEmbedder()
        )
        result = asyncio.run(agent.run(ScriptedPatient(opening=answer)))
        return result.final_state.red_flags

    assert run("I coughed up blood this morning.") == ("haemoptysis",)
    assert run("A cough, but no blood when I cough.") == ()


@pytest.fixture(scope="module")
def repeats(data_root: Path) -> TopicRepeats:
    return TopicRepeats.from_data_root(str(data_root))


def test_topic_repeats_on_questions_a_reader_would_call_repeats(repeats: TopicRepeats) -> None:
    qs = [
        "When did the cough start?",
        "Is the cough worse at night?",
        "When did your cough start?",  # repeats 0
        "Do you smoke?",
        "Do you smoke cigarettes?",  # repeats 3 (same habit, {smoke} of {smoke, cigarett})
        "Have you had a fever?",
        "Any fevers?",  # repeats 5: the same concept, nothing else asked
        "Does anyone in your family have asthma?",
        "Have you ever been diagnosed with asthma?",  # same concept, other category: new
    ]
    assert repeats.repeats(qs) == [None, None, 0, None, 3, None, 5, None, None]
    assert repeats.rate(qs) == pytest.approx(3 / 9)
    assert repeats.rate([]) == 0.0


def test_topic_repeats_do_not_depend_on_the_controls_embedder(repeats: TopicRepeats) -> None:
    from medagent.history.agent.redundancy import redundant_share

    qs = ["When did the cough start?", "When did your cough start?"]
    # The control's measure with an embedder that sees every pair as different says 0 beyond verbatim;
    # the lexical check still finds the repeat.

    class Orthogonal:
        def encode(self, texts):  # type: ignore[no-untyped-def]
            import numpy as np

            return np.eye(len(texts), dtype=np.float32)

    assert redundant_share(qs, Orthogonal(), 0.75) == 0.0
    assert repeats.rate(qs) == 0.5


def test_lexical_repeat_rate_is_filled_from_the_asked_questions(repeats: TopicRepeats) -> None:
    recs = [_rec("T1"), _rec("T2", error="LLMError: down")]
    rows = {
        "T1": {
            "result": {"final_state": {"asked": [{"text": "Any fevers?"}, {"text": "Have you had a fever?"}]}}
        },
        "T2": {"error": "LLMError: down"},
    }
    add_lexical_repeats(recs, rows, repeats)
    assert recs[0].repeat_rate_lexical == 0.5 and recs[1].repeat_rate_lexical is None
