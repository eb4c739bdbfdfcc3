import jinja2
import pytest

from medagent.prompts import list_prompts, load_prompt

VARIABLES = {
    "question": "Q?",
    "options": {"A": "a", "B": "b"},
    "complaint": "a dry cough",  # history_patient
    # annotate_* prompts (medagent.interview.annotate.llm)
    "transcript": "[0] Doctor: Q?",
    "symptom_names": ["coughing", "fever"],
    "categories": ["symptom", "habit"],
    "question_turns": [0],
    "error": "Q? was not JSON",
    # qa_* prompts (medagent.agent.qa, tools, no_tools)
    "tools": [{"name": "enable_search", "description": "search"}],
    "search": True,
    "batch_size": 4,
    "max_batches": 8,
    "open_ended": False,
    "n_options": 5,
    "documents": '<document id="D1" source="s" title="t">text</document>',
    "memory": True,
    "keep": "documents",
    "evidence": '<evidence id="D1" source="s" title="t">text</evidence>',
    # history_* prompts (medagent.history)
    "summary": "Q? cough for 3 days",
    "slots": [{"name": "onset", "category": "symptom", "description": "when", "value": "3 days ago"}],
    "differential": [{"diagnosis": "URTI", "probability": 0.6, "reason": "cough"}],
    "red_flags": ["haemoptysis: coughing up blood"],
    "red_flag_definitions": {"haemoptysis": "coughing up blood"},
    "answer": "Three days ago.",
    "max_hypotheses": 5,
    "phase": "triage",
    "asked": ["What brings you in?"],
    "target": "onset",
    "target_description": "when it started",
    "finding": "cough",
    "blocked": "When did it start?",
    "blocked_reason": "verbatim",
    "findings": "- onset: 3 days ago",
    "passages": [{"id": "g1#p0", "source": "guidelines", "title": "Cough", "content": "text"}],
    "source": "Doctor: Q?\nPatient: A cough.",
    "history": [{"question": "Any fever?", "answer": "No."}],
    "excerpt": "Doctor: Q?\nPatient: A cough.",
    "facts": [{"statement": "cough", "quote": "A cough."}],
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


FEEDBACK_VARIABLES = {"detail": "d", "open_ended": False, "error": "e", "tool": "t", "letters": ["A", "B"],
                      "limit": 4, "tools": ["a", "b"], "content": "c",
                      # qa_tools (medagent.agent.tools)
                      "lines": "l", "listing": "l", "query": "'q'", "body": "b", "new": 1, "duplicates": 0,
                      "queued": 2, "batch_size": 4, "batches_left": 1, "max_batches": 2, "batch": 1, "done": "D1",
                      "next": "final_answer", "wanted": "['D2']", "pending": "['D1']", "evidence": "e",
                      "skipped": "D3"}  # fmt: skip


def test_every_feedback_text_renders() -> None:
    from medagent.prompts import list_feedback, load_feedback

    assert list_feedback() == ["qa_agent", "qa_tools", "qa_tools_plain"]
    # A tool-feedback variant is chosen by config (agent.loop.feedback): every key must be in each.
    assert load_feedback("qa_tools_plain").texts.keys() == load_feedback("qa_tools").texts.keys()
    for name in list_feedback():
        feedback = load_feedback(name)
        for key in feedback.texts:
            assert feedback.text(key, **FEEDBACK_VARIABLES), (name, key)
    with pytest.raises(jinja2.UndefinedError):
        load_feedback("qa_agent").text("repeat")


def test_plain_tool_feedback_names_no_next_tool() -> None:
    from medagent.prompts import load_feedback

    plain = load_feedback("qa_tools_plain")
    for key in plain.texts:
        text = plain.text(key, **FEEDBACK_VARIABLES)
        assert not any(
            f"call {t}" in text.lower()
            for t in ("relevance_analysis", "locate_evidence", "final_answer", "enable_search")
        ), key
