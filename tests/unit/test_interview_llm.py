"""The LLM annotator with scripted models: schema, chunking, malformed replies, endpoint failures."""

import asyncio
import json
from dataclasses import asdict
from typing import Any

import pytest

from actors.annotate_worker import AnnotateWorker
from medagent.config import AnnotatorConfig, LLMConfig
from medagent.interview.annotate.llm import (
    LLMAnnotator,
    MalformedReply,
    chunk_turns,
    extraction_schema,
    parse_reply,
)
from medagent.interview.annotate.matcher import Lexicon
from medagent.interview.transcripts import Interview, parse_transcript
from medagent.interview.types import INQUIRY_CATEGORIES, Turn
from medagent.llm.base import LLMError
from medagent.llm.endpoints import HttpEndpoint
from tests.fakes import ScriptedChatModel, completion

SYMPTOMS = Lexicon([("cough", ["coughing"]), ("fever", ["fever"]), ("short of breath", ["dyspnea"])])
DISEASES = Lexicon([("copd", ["chronic obstructive airway disease"]), ("pneumonia", ["pneumonia"])])
INTERVIEW = parse_transcript(
    "D: What brings you in?\nP: A cough.\nD: Any fever?\nP: No.\nD: Do you smoke?\nP: Yes.\n"
    "D: It could be COPD or pneumonia.\nP: OK.",
    "RES9999",
)
GOOD = {
    "positive_findings": ["coughing"],
    "negative_findings": ["fever"],
    "diagnoses": ["COPD", "something rare"],
    "question_categories": {"2": "symptom", "4": "habit"},
}


def _annotator(script: Any, **cfg: Any) -> tuple[LLMAnnotator, ScriptedChatModel]:
    model = ScriptedChatModel(script)
    return LLMAnnotator(model, AnnotatorConfig(kind="llm", **cfg), SYMPTOMS, DISEASES), model


def test_constrained_request_and_parsed_annotation() -> None:
    ann, model = _annotator([completion(json.dumps(GOOD))])
    a = asyncio.run(ann.annotate(INTERVIEW))
    assert a.annotator == "llm" and a.errors == []
    assert (a.positive_findings, a.negative_findings) == (["coughing"], ["fever"])
    assert a.diagnoses == ["chronic obstructive airway disease", "something rare"]
    assert [(q.turn, q.category) for q in a.questions] == [(2, "symptom"), (4, "habit")]
    body = model.requests[0]
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["positive_findings"]["items"]["enum"] == ["coughing", "dyspnea", "fever"]
    cats = schema["properties"]["question_categories"]
    assert cats["required"] == ["2", "4"] and cats["properties"]["2"]["enum"] == list(INQUIRY_CATEGORIES)
    assert "[3] Patient: No." in body["messages"][-1]["content"]
    assert "coughing, dyspnea, fever" in body["messages"][-1]["content"]


def test_malformed_json_is_retried_with_the_error_then_recorded() -> None:
    ann, model = _annotator([completion('{"positive_findings": ["coughing"'), completion(json.dumps(GOOD))])
    a = asyncio.run(ann.annotate(INTERVIEW))
    assert a.positive_findings == ["coughing"]
    assert len(a.errors) == 1 and "malformed reply (attempt 1)" in a.errors[0]
    first, retry = model.requests[0]["messages"], model.requests[1]["messages"]
    assert retry[: len(first)] == first and len(retry) == len(first) + 1
    assert "could not be used" in retry[-1]["content"] and "positive_findings" in retry[-1]["content"]


def test_malformed_twice_leaves_the_chunk_empty() -> None:
    cut = completion('{"positive_findings": ["coughing", "cou')
    cut["choices"][0]["finish_reason"] = "length"
    ann, _ = _annotator([cut, completion('{"diagnoses": []}')])
    a = asyncio.run(ann.annotate(INTERVIEW))
    assert (a.positive_findings, a.negative_findings, a.diagnoses, a.questions) == ([], [], [], [])
    assert "no JSON object" in a.errors[0] and "reply cut at max_tokens=768" in a.errors[0]
    assert "keys missing" in a.errors[1]
    assert "no usable reply after 2 attempts" in a.errors[2]


def test_endpoint_failure_and_bad_values_are_recorded_never_raised() -> None:
    ann, _ = _annotator([LLMError("replica died")])
    a = asyncio.run(ann.annotate(INTERVIEW))
    assert a.errors == ["chunk 1/1 (turns 0-7): LLMError: replica died; chunk left empty"]
    odd = {
        **GOOD,
        "positive_findings": ["Short of breath", "unicorn pox"],
        "question_categories": {"2": "symptom"},
    }
    ann, _ = _annotator([completion(json.dumps(odd))], max_retries=0)
    a = asyncio.run(ann.annotate(INTERVIEW))
    assert a.positive_findings == ["dyspnea"]  # mapped through the lexicon
    assert any("unknown symptom name 'unicorn pox' dropped" in e for e in a.errors)
    assert any("turn 4: category None" in e for e in a.errors) and [q.turn for q in a.questions] == [2]


def test_no_schema_backend_gets_no_response_format() -> None:
    model = ScriptedChatModel([completion("```json\n" + json.dumps(GOOD) + "\n```")])
    ann = LLMAnnotator(model, AnnotatorConfig(kind="llm"), SYMPTOMS, DISEASES, json_schema=False)
    a = asyncio.run(ann.annotate(INTERVIEW))
    assert a.errors == [] and "response_format" not in model.requests[0]


def test_parse_reply_checks_types() -> None:
    assert parse_reply(json.dumps(GOOD))["question_categories"] == {"2": "symptom", "4": "habit"}
    with pytest.raises(MalformedReply, match="list of strings"):
        parse_reply(json.dumps({**GOOD, "diagnoses": "copd"}))
    with pytest.raises(MalformedReply, match="question_categories"):
        parse_reply(json.dumps({**GOOD, "question_categories": []}))


def test_chunks_respect_the_budget_and_keep_questions_with_answers() -> None:
    turns = [Turn(i, "doctor" if i % 2 == 0 else "patient", "x" * 40) for i in range(10)]  # 16 tokens each
    chunks = chunk_turns(turns, 40)
    assert [[t.index for t in c] for c in chunks] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    odd = [
        Turn(0, "patient", "x" * 40),
        *[Turn(i, "doctor" if i % 2 else "patient", "x" * 40) for i in range(1, 5)],
    ]
    assert [[t.index for t in c] for c in chunk_turns(odd, 40)] == [[0], [1, 2], [3, 4]]
    assert chunk_turns([Turn(0, "doctor", "x" * 1000)], 40) == [[Turn(0, "doctor", "x" * 1000)]]
    schema = extraction_schema(["a"], [], 3, 1)["json_schema"]["schema"]
    assert schema["properties"]["question_categories"]["required"] == []
    assert schema["properties"]["positive_findings"]["maxItems"] == 3


def test_long_interview_is_annotated_chunk_by_chunk() -> None:
    turns = []
    for i in range(0, 20, 2):
        turns += [Turn(i, "doctor", f"Any cough number {i}?"), Turn(i + 1, "patient", "Yes, a cough.")]
    iv = Interview("long", "fareez", tuple(turns))

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        cats = body["response_format"]["json_schema"]["schema"]["properties"]["question_categories"][
            "required"
        ]
        return completion(json.dumps({**GOOD, "question_categories": {k: "symptom" for k in cats}}))

    model = ScriptedChatModel(reply)
    ann = LLMAnnotator(model, AnnotatorConfig(kind="llm", max_chunk_tokens=60), SYMPTOMS, DISEASES)
    a = asyncio.run(ann.annotate(iv))
    assert len(model.requests) > 1 and [q.turn for q in a.questions] == list(range(0, 20, 2))


def test_worker_records_endpoint_failures_and_names_missing_columns() -> None:
    llm = asdict(LLMConfig(served_name="m", max_retries=0, request_timeout_s=2.0))
    worker = AnnotateWorker(
        asdict(AnnotatorConfig(kind="llm")),
        llm,
        HttpEndpoint("http://127.0.0.1:9/v1"),
        SYMPTOMS,
        DISEASES,
    )
    out = worker({"id": ["RES9999"], "role": ["run"], "interview": [INTERVIEW.to_json()]})
    assert out["id"] == ["RES9999"] and out["role"] == ["run"]
    errors = json.loads(out["annotation"][0])["errors"]
    assert errors and "LLMError" in errors[0]
    with pytest.raises(ValueError, match=r"AnnotateWorker.*'interview'"):
        worker({"id": ["x"], "role": ["run"]})
