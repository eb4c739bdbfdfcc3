"""The QA tools' reply schemas: every free-text field bounded (agent.cap_outputs), every output of the
paper's tools kept, and ``cap_outputs=false`` sending the unbounded schemas."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from medagent.agent.tools.compare import CappedCompareReply, CompareReply
from medagent.agent.tools.locate import CappedLocateReply, LocateReply
from medagent.agent.tools.options import CappedOptionsReply, OptionsReply
from medagent.agent.tools.relevance import CappedRelevanceReply, RelevanceReply
from medagent.llm.structured import Output, json_schema

CAPPED = [
    (CappedCompareReply, CompareReply, "comparison", {"option": 8, "supporting": 100, "against": 100}, 10),
    (CappedRelevanceReply, RelevanceReply, "judgements", {"id": 8, "reason": 100}, 16),
    (CappedLocateReply, LocateReply, "evidence", {"id": 8, "quote": 400}, 8),
]


def _strings(node: Any) -> list[dict[str, Any]]:
    """Every string-typed node of a schema."""
    if isinstance(node, list):
        return [s for n in node for s in _strings(n)]
    if not isinstance(node, dict):
        return []
    own = [node] if node.get("type") == "string" else []
    return own + [s for v in node.values() for s in _strings(v)]


@pytest.mark.parametrize(("capped", "old", "field", "caps", "rows"), CAPPED)
def test_capped_replies_bound_every_field_and_keep_the_same_outputs(
    capped: type[Output], old: type[Output], field: str, caps: dict[str, int], rows: int
) -> None:
    schema = json_schema(capped)
    array = schema["properties"][field]
    assert array["maxItems"] == rows
    props = array["items"]["properties"]
    assert {k: props[k]["maxLength"] for k in caps} == caps
    # Same outputs as the unbounded reply: nothing the tool reports is dropped.
    assert set(props) == set(json_schema(old)["properties"][field]["items"]["properties"])
    assert all("maxLength" in s or "enum" in s for s in _strings(schema))
    assert not any("maxLength" in s for s in _strings(json_schema(old)))


def test_the_verdict_is_one_of_the_prompt_s_words_and_options_are_short() -> None:
    verdict = json_schema(CappedCompareReply)["properties"]["comparison"]["items"]["properties"]["verdict"]
    assert verdict["enum"] == ["likely", "possible", "unlikely"]
    options = json_schema(CappedOptionsReply)["properties"]["options"]
    assert (options["maxItems"], options["items"]["maxLength"]) == (10, 80)
    assert "maxItems" not in json_schema(OptionsReply)["properties"]["options"]


def test_reading_a_capped_reply_accepts_what_an_unconstrained_backend_writes() -> None:
    long = "x" * 500
    reply = CappedCompareReply.model_validate([{"option": 1, "supporting": long, "verdict": "maybe"}])
    assert reply.comparison[0].option == "1" and reply.comparison[0].supporting == long


@pytest.mark.parametrize("cap", [True, False])
def test_perform_comparison_sends_the_schema_its_config_asks_for(cap: bool) -> None:
    from dataclasses import replace

    from medagent.agent.tools import run_tool
    from tests.unit._qa_fakes import Q

    sent: list[dict[str, Any]] = []

    class Ctx:
        question = Q

        def __init__(self) -> None:
            from tests.configs import agent_config

            base = agent_config()
            self.cfg = replace(base, cap_outputs=cap)

        def options(self) -> dict[str, str]:
            return dict(Q.options or {})

        async def ask(self, prompt: str, output: type[Output], **variables: Any) -> Output:
            sent.append(json_schema(output))
            return output.model_validate({"comparison": [{"option": "A", "verdict": "likely"}]})

        def say(self, key: str, **variables: Any) -> str:
            return key

    asyncio.run(run_tool("perform_comparison", Ctx(), {}))  # type: ignore[arg-type]
    row = sent[0]["properties"]["comparison"]["items"]["properties"]
    assert ("maxLength" in row["supporting"]) is cap
