"""Each question's own evidence held out of its searches: the articles a row names, the documents cut from
them, and concurrent questions that keep their own held-out sets."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from typing import Any

import pytest

from medagent.api import Doc
from medagent.config import AgentConfig, LLMConfig
from medagent.retrieval.holdout import HeldOutRetriever, article_of, evidence_articles, holding_out
from medagent.types import Question


def _doc(doc_id: str, source: str, score: float) -> Doc:
    return Doc(id=f"{doc_id}#0", source=source, title="", content=f"text of {doc_id}", score=score,
               doc_id=doc_id, parent_id=doc_id)  # fmt: skip


DOCS = [
    _doc("pubmedqa:111", "pubmedqa", 0.9),
    _doc("bioasq:222:abc", "bioasq", 0.8),
    _doc("pubmedqa:333", "pubmedqa", 0.7),
    _doc("medquad:1-1", "medquad", 0.6),
    _doc("bioasq:222:def", "bioasq", 0.5),
    _doc("bioasq:444:aaa", "bioasq", 0.4),
]


class FakeRetriever:
    def __init__(self) -> None:
        self.asked: list[int] = []

    async def retrieve(self, query: str, top_k: int, **kwargs: Any) -> list[Doc]:
        self.asked.append(top_k)
        await asyncio.sleep(0)  # let the other question's task run in between
        return list(DOCS)


def test_articles_come_from_the_row_and_from_the_document_ids() -> None:
    pubmedqa = Question("pubmedqa-111", "q?", {"A": "yes"}, "pubmedqa", {"contexts": ["..."]})
    bioasq = Question("bioasq-x", "q?", {"A": "yes"}, "bioasq",
                      {"documents": ["http://www.ncbi.nlm.nih.gov/pubmed/222", "http://x/pubmed/444/"]})  # fmt: skip
    assert evidence_articles(pubmedqa) == {"pubmed:111"}
    assert evidence_articles(bioasq) == {"pubmed:222", "pubmed:444"}
    assert evidence_articles(Question("medqa-1", "q?", {"A": "x"}, "medqa")) == frozenset()
    assert [article_of(d) for d in DOCS] == ["pubmed:111", "pubmed:222", "pubmed:333", None, "pubmed:222",
                                             "pubmed:444"]  # fmt: skip


def test_concurrent_questions_each_lose_only_their_own_articles() -> None:
    inner = FakeRetriever()
    retriever = HeldOutRetriever(inner)

    async def search(held: frozenset[str]) -> list[str]:
        with holding_out(held):
            return [d.doc_id for d in await retriever.retrieve("q", 1)]

    async def both() -> list[list[str]]:
        return list(await asyncio.gather(search(frozenset({"pubmed:111"})), search(frozenset({"pubmed:222"})),
                                         search(frozenset())))  # fmt: skip

    first, second, none = asyncio.run(both())
    # top_k per source after the drop, best first; the unheld question gets the inner client's results.
    assert first == ["bioasq:222:abc", "pubmedqa:333", "medquad:1-1"]
    assert second == ["pubmedqa:111", "medquad:1-1", "bioasq:444:aaa"]
    assert none == [d.doc_id for d in DOCS]
    assert inner.asked == [1 + 4, 1 + 4, 1] and retriever.dropped == 3


def test_the_worker_holds_out_only_when_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    import actors.agent_worker as aw
    from medagent.llm.endpoints import HandleEndpoint
    from medagent.types import Prediction
    from tests.fakes import ScriptedChatModel, completion

    class Reranker:
        async def rerank(self, query: str, docs: list[Doc], top_r: int) -> list[Doc]:
            return docs[:top_r]

    monkeypatch.setattr(
        aw, "services_for", lambda endpoint: {"retriever": FakeRetriever(), "reranker": Reranker()}
    )
    prompts: list[str] = []

    def reply(body: dict[str, Any]) -> Any:
        prompts.append(json.dumps(body["messages"]))
        return completion('{"answer": "A"}')

    q = Question("pubmedqa-111", "Does it work?", {"A": "yes", "B": "no", "C": "maybe"}, "pubmedqa")
    batch = {"id": [q.id], "question": [json.dumps(q.to_dict())]}
    for hold_out in (False, True):
        agent = AgentConfig(mode="no_tools")
        agent.retrieval.hold_out_own_evidence = hold_out
        worker = aw.AgentWorker(asdict(agent), asdict(LLMConfig(served_name="m")), HandleEndpoint("x", "y"),
                                services_endpoint=HandleEndpoint("x", "y"),  # type: ignore[arg-type]
                                chat_model_factory=lambda llm, endpoint: ScriptedChatModel(reply))  # fmt: skip
        out = asyncio.run(worker(batch))
        assert Prediction.from_dict(json.loads(out["prediction"][0])).answer == "A"
    shown, held = prompts
    assert "text of pubmedqa:111" in shown and "text of pubmedqa:111" not in held
    assert "text of bioasq:222:abc" in held  # another question's article stays
