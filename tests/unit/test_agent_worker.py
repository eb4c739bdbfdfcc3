"""AgentWorker logic without Ray: the HTTP endpoint path with an unreachable server."""

import asyncio
import json
from dataclasses import asdict

import pytest

from actors.agent_worker import AgentWorker
from medagent.config import AgentConfig, LLMConfig
from medagent.llm.endpoints import HandleEndpoint, HttpEndpoint
from medagent.types import INVALID, Prediction, Question


def _batch(*ids: str) -> dict[str, list[str]]:
    qs = [Question(id=i, text="t", options={"A": "x", "B": "y"}, benchmark="b") for i in ids]
    return {"id": list(ids), "question": [json.dumps(q.to_dict()) for q in qs]}


def test_endpoint_failure_becomes_error_column_and_batch_goes_on() -> None:
    llm = asdict(LLMConfig(served_name="m", max_retries=0, request_timeout_s=2.0))
    worker = AgentWorker(asdict(AgentConfig()), llm, HttpEndpoint("http://127.0.0.1:9/v1"))
    out = asyncio.run(worker(_batch("q1", "q2")))
    assert out["id"] == ["q1", "q2"]
    preds = [Prediction.from_dict(json.loads(s)) for s in out["prediction"]]
    assert all(p.answer == INVALID and p.error and p.error.startswith("LLMError") for p in preds)


def test_missing_column_names_stage_and_key() -> None:
    worker = AgentWorker(
        asdict(AgentConfig()),
        asdict(LLMConfig(served_name="m")),
        HttpEndpoint("http://127.0.0.1:9/v1"),
    )
    with pytest.raises(ValueError, match=r"AgentWorker.*'question'"):
        asyncio.run(worker({"id": ["q1"]}))


def test_injected_chat_model_answers_the_batch() -> None:
    from tests.fakes import ScriptedChatModel, completion

    seen: list[tuple[str, object]] = []

    def factory(llm: LLMConfig, endpoint: object) -> ScriptedChatModel:
        seen.append((llm.served_name, endpoint))
        return ScriptedChatModel(lambda body: completion('{"answer": "B"}'))

    worker = AgentWorker(asdict(AgentConfig()), asdict(LLMConfig(served_name="m")), HandleEndpoint("x", "y"),
                         chat_model_factory=factory)  # fmt: skip
    out = asyncio.run(worker(_batch("q1", "q2")))
    preds = [Prediction.from_dict(json.loads(s)) for s in out["prediction"]]
    assert [p.answer for p in preds] == ["B", "B"] and seen == [("m", HandleEndpoint("x", "y"))]
