import jinja2
import pytest

from medagent.prompts import list_prompts, load_prompt

VARIABLES = {
    "question": "Q?",
    "options": {"A": "a", "B": "b"},
    # annotate_* prompts (medagent.interview.annotate.llm)
    "transcript": "[0] Doctor: Q?",
    "symptom_names": ["coughing", "fever"],
    "categories": ["symptom", "habit"],
    "question_turns": [0],
    "error": "Q? was not JSON",
}


@pytest.mark.parametrize("name", list_prompts())
def test_every_prompt_renders(name: str) -> None:
    messages = load_prompt(name).render(**VARIABLES)
    assert messages and all(m["content"] for m in messages)
    assert any("Q?" in m["content"] for m in messages)


def test_missing_variable_raises() -> None:
    with pytest.raises(jinja2.UndefinedError):
        load_prompt("standalone_mc").render(question="Q?")


def test_unknown_prompt_lists_known() -> None:
    with pytest.raises(FileNotFoundError, match="standalone_mc"):
        load_prompt("nope")
