import pytest

from medagent.agent.answers import answer_schema, parse_choice, parse_json_object
from medagent.types import INVALID

OPTS = {"A": "Aspirin", "B": "Apple pie", "C": "Clopidogrel"}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("B", "B"),
        ("(C)", "C"),
        ("The answer is (C).", "C"),
        ("Answer: A", "A"),
        ('{"answer": "B"}', "B"),
        ('{\n  "answer": "B"\n', "B"),  # constrained output cut off by max_tokens
        ('```json\n{"answer": "A"}\n```', "A"),
        ("B. Apple pie, because ...", "B"),
        ("apple pie", "B"),  # the exact text of one option
    ],
)
def test_parse_choice_commits(reply: str, expected: str) -> None:
    assert parse_choice(reply, OPTS) == expected


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        "the answer is a bit unclear",  # lowercase 'a' is a word, not option A
        "A or B",
        "I think C is wrong and A is right",
        "Final answer: D",  # not among the options
        '{"answer": "E"}',
        '{"answer": "A"} and {"answer": "B"}',
        "It depends on the patient's history.",
    ],
)
def test_parse_choice_never_guesses(reply: str) -> None:
    assert parse_choice(reply, OPTS) == INVALID


def test_parse_json_object_finds_first_object() -> None:
    assert parse_json_object('text {"name": "x", "arguments": {}} more {"b": 1}') == {
        "name": "x",
        "arguments": {},
    }
    assert parse_json_object("no json here") is None
    assert parse_json_object('{broken {"a": 2}') == {"a": 2}


def test_answer_schema_enumerates_letters() -> None:
    schema = answer_schema(["A", "B"])
    assert schema["type"] == "json_schema"
    assert schema["json_schema"]["schema"]["properties"]["answer"]["enum"] == ["A", "B"]  # type: ignore[index]
