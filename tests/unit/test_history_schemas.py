"""The history-taking calls' output models give the schemas that were written by hand before them (the
model must see the same: properties, order, caps, required, no other keys)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from medagent.config import HistoryAgentConfig
from medagent.history.agent.assessment import assessment_schema
from medagent.history.agent.policy import QuestionReply
from medagent.history.agent.preprocess import ROUTES, SummaryReply, update_schema
from medagent.history.agent.state import NO_SLOT, SLOTS
from medagent.history.simulation.reference import red_flags_model
from medagent.history.simulation.simulator import FIDELITY_LABELS, FidelityVerdict
from medagent.llm.structured import response_format
from tests.configs import history_agent_config


# The hand-written helpers the output models replace, as they were.
def json_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def obj_schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def string(max_length: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length}


def array(items: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items}


def old_update_schema(cfg: HistoryAgentConfig) -> dict[str, Any]:
    """The per-turn update as a change: a summary sentence and slot updates with quotes (no whole state)."""
    fact = obj_schema(
        {
            "slot": {"type": "string", "enum": [s.name for s in SLOTS]},
            "value": string(80),
            "quote": string(160),
        }
    )
    hypothesis = obj_schema(
        {"diagnosis": string(80), "probability": {"type": "number"}, "reason": string(80)}
    )
    schema = obj_schema(
        {
            "summary_add": string(300),
            "slot_updates": array(fact, cfg.generation.max_facts_per_turn),
            "differential": array(hypothesis, cfg.generation.max_hypotheses),
            "red_flags": array(
                obj_schema({"id": {"type": "string", "enum": list(cfg.red_flags)}, "quote": string(200)}),
                len(cfg.red_flags),
            ),
            "route": {"type": "string", "enum": list(ROUTES)},
        }
    )
    return json_format("history_update", schema)


def old_assessment_schema(passage_ids: list[str], max_hypotheses: int) -> dict[str, Any]:
    cite: dict[str, Any] = (
        array({"type": "string", "enum": passage_ids}, 4)
        if passage_ids
        else {"type": "array", "items": {"type": "string"}, "maxItems": 0}
    )
    dx = obj_schema({"diagnosis": string(100), "reason": string(300), "citations": cite})
    return json_format(
        "history_assessment",
        obj_schema(
            {
                "statement": string(1500),
                "differential": array(dx, max_hypotheses),
                "next_steps": array(string(200), 6),
                "red_flags": array(string(160), 6),
            }
        ),
    )


def old_question_schema() -> dict[str, Any]:
    slots = [s.name for s in SLOTS] + [NO_SLOT]
    return json_format(
        "history_question",
        obj_schema(
            {"question": {"type": "string", "maxLength": 240}, "slot": {"type": "string", "enum": slots}}
        ),
    )


def old_red_flags_schema(red_flags: dict[str, str]) -> dict[str, Any]:
    flag = obj_schema({"id": {"type": "string", "enum": list(red_flags)}, "quote": string(200)})
    return json_format("red_flags", obj_schema({"red_flags": array(flag, len(red_flags))}))


OLD_FIDELITY = json_format(
    "fidelity",
    obj_schema({"label": {"type": "string", "enum": list(FIDELITY_LABELS)}, "rationale": string(200)}),
)
OLD_SUMMARY = json_format("clinical_summary", obj_schema({"summary": string(1500)}))

CFGS = [
    history_agent_config(),
    history_agent_config(
        max_facts_per_turn=2, max_hypotheses=3, red_flags={"fever_rash": "a rash with fever"}
    ),
]


def _same(new: dict[str, Any], old: dict[str, Any]) -> None:
    assert new == old
    assert json.dumps(new) == json.dumps(old)  # key order too: a schema rendered into a prompt reads the same


@pytest.mark.parametrize("cfg", CFGS, ids=["default", "small"])
def test_update_schema_equals_the_hand_written_one(cfg: HistoryAgentConfig) -> None:
    _same(update_schema(cfg), old_update_schema(cfg))


@pytest.mark.parametrize(("ids", "k"), [(["g1#p0", "g2#p3"], 5), ([], 3)])
def test_assessment_schema_equals_the_hand_written_one(ids: list[str], k: int) -> None:
    _same(assessment_schema(ids, k), old_assessment_schema(ids, k))


def test_question_summary_fidelity_and_red_flag_schemas_equal_the_hand_written_ones() -> None:
    _same(response_format("history_question", QuestionReply), old_question_schema())
    _same(response_format("clinical_summary", SummaryReply), OLD_SUMMARY)
    _same(response_format("fidelity", FidelityVerdict), OLD_FIDELITY)
    for cfg in CFGS:
        _same(
            response_format("red_flags", red_flags_model(tuple(cfg.red_flags))),
            old_red_flags_schema(cfg.red_flags),
        )


@pytest.mark.parametrize(
    ("question", "ok"),
    [
        ("How old are you?", True),
        ("Do you have patients at work who are ill?", True),
        ("What is the patient's age?", False),
        ("What tests has the patient had so far?", False),
        ("What is THE PATIENT's main concern?", False),
    ],
)
def test_a_question_is_said_to_the_patient_not_about_them(question: str, ok: bool) -> None:
    reply = {"question": question, "slot": SLOTS[0].name}
    if ok:
        assert QuestionReply.model_validate(reply).question == question
    else:
        with pytest.raises(ValueError, match="said to the patient"):
            QuestionReply.model_validate(reply)
