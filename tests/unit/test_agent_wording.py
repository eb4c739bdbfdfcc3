"""Agent wording of the patient validation: the agent's model rewords each physician question, cached and
resumable; a reply that stays malformed leaves its probe out, recorded, never the original wording."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from medagent.history.evaluation.agent_wording import RewordCache, reword
from medagent.history.evaluation.patient_validation import probes
from medagent.interview.transcripts import parse_transcript
from medagent.llm.base import LLMError
from tests.fakes import ScriptedChatModel, completion

IV = parse_transcript(
    "D: OK, um, so what brings you in?\nP: A cough.\nD: OK. Do you smoke?\nP: Half a pack a day.\n", "T1"
)
AGENT = {
    "OK, um, so what brings you in?": "What brings you in today?",
    "OK. Do you smoke?": "Do you smoke cigarettes or use any other tobacco?",
}


def _reworder(body: dict[str, Any]) -> dict[str, Any]:
    assert body["prompt"] == "history_reword" and body["response_format"] is not None
    asked = body["messages"][-1]["content"].split('"')[1]
    return completion(json.dumps({"question": AGENT[asked]}))


def test_rewordings_are_cached_and_not_asked_again(tmp_path: Path) -> None:
    llm = ScriptedChatModel(_reworder)
    qs = [p.question for p in probes("T1", IV.turns, "own")]
    got, errors = asyncio.run(reword(llm, qs, RewordCache.open(tmp_path, "m/1")))
    assert got == AGENT and errors == [] and len(llm.requests) == 2
    # The agent's system message is the one the agent asks its questions with.
    assert "physician taking a clinical history" in llm.requests[0]["messages"][0]["content"]
    again = ScriptedChatModel(_reworder)
    got, _ = asyncio.run(reword(again, qs, RewordCache.open(tmp_path, "m/1")))
    assert got == AGENT and again.requests == []
    agent = probes("T1", IV.turns, "agent", reworded=got)
    assert [(p.exchange, p.question, p.wording) for p in agent] == [
        (0, "What brings you in today?", "agent"),
        (1, "Do you smoke cigarettes or use any other tobacco?", "agent"),
    ]


def test_a_reply_malformed_twice_leaves_its_probe_out_with_the_error(tmp_path: Path) -> None:
    def llm_script(body: dict[str, Any]) -> dict[str, Any]:
        if "smoke" in body["messages"][1]["content"]:
            return completion('{"q": 1}')
        return _reworder(body)

    qs = list(AGENT)
    got, errors = asyncio.run(reword(ScriptedChatModel(llm_script), qs, RewordCache.open(tmp_path, "m")))
    assert list(got) == ["OK, um, so what brings you in?"]
    assert len(errors) == 1 and "smoke" in errors[0]
    assert [p.exchange for p in probes("T1", IV.turns, "agent", reworded=got)] == [0]
    with pytest.raises(ValueError, match="rewordings"):
        probes("T1", IV.turns, "agent")


def test_a_failed_endpoint_raises_and_keeps_what_was_reworded(tmp_path: Path) -> None:
    calls = iter([completion(json.dumps({"question": "What brings you in today?"})), LLMError("down")])

    def script(body: dict[str, Any]) -> dict[str, Any]:
        item = next(calls)
        if isinstance(item, Exception):
            raise item
        return item

    with pytest.raises(LLMError):
        asyncio.run(
            reword(ScriptedChatModel(script), list(AGENT), RewordCache.open(tmp_path, "m"), concurrency=1)
        )
    assert RewordCache.open(tmp_path, "m").items == {
        "OK, um, so what brings you in?": "What brings you in today?"
    }


def test_a_rewording_about_the_patient_is_asked_again_as_the_agent_would_be(tmp_path: Path) -> None:
    replies = iter(
        [
            completion(json.dumps({"question": "Does the patient smoke?"})),
            completion(json.dumps({"question": "Do you smoke?"})),
        ]
    )
    llm = ScriptedChatModel(lambda body: next(replies))
    got, errors = asyncio.run(reword(llm, ["OK. Do you smoke?"], RewordCache.open(tmp_path, "m")))
    assert got == {"OK. Do you smoke?": "Do you smoke?"} and errors == [] and len(llm.requests) == 2
    assert "the patient" in llm.requests[1]["messages"][-1]["content"]  # the error, shown to the model
