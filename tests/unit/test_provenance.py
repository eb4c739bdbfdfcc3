"""Provenance in every trace: each search step names its documents (corpus id, source, both scores, the
handle the model saw); the memory snapshot maps reviewed, quoted and pruned handles back to them; the report
counts evidence by source and finds the gold text in what was retrieved; traces without any of it still load."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from medagent.agent import build_agent
from medagent.agent.provenance import RETRIEVED, search_records
from medagent.agent.services import AgentDeps, Doc
from medagent.report.evidence import contains_gold, evidence_by_source, gold_in_retrieved
from medagent.report.loader import load_runs
from medagent.run import RunDir
from medagent.run.trace_view import format_step
from medagent.types import Prediction
from tests.configs import agent_config
from tests.unit._qa_fakes import AgentModel, FakeRetriever, Q, fenced, make_docs, native
from tests.unit._report_fakes import make_run


class ReversingReranker:
    """Reverses the candidates and scores them 10, 9, ...: rerank scores differ from first-stage ones."""

    async def rerank(self, query: str, docs: list[Doc], top_r: int) -> list[Doc]:
        return [dataclasses.replace(d, score=10.0 - i) for i, d in enumerate(reversed(docs))][:top_r]


SCRIPT = [
    fenced("enable_search", {"query": "P2Y12 inhibitor"}),
    native("relevance_analysis", {}),
    native("locate_evidence", {"doc_ids": ["D1"]}),
    native("enable_search", {"query": "clopidogrel platelets"}),
    native("final_answer", {"answer": "B"}),
]


def _run_full() -> Prediction:
    docs = make_docs(3, source="pubmed") + make_docs(2, source="wikipedia", prefix="w")
    deps = AgentDeps(retriever=FakeRetriever(docs), reranker=ReversingReranker(), json_schema=True)
    agent = build_agent(
        agent_config(mode="full", top_k=32, top_r=4, batch_size=2), AgentModel(list(SCRIPT)), deps
    )
    return asyncio.run(agent.answer(Q))


def test_each_search_step_names_its_documents_scores_and_handles() -> None:
    pred = _run_full()
    first, second = [s for s in pred.trace if s.get("tool") == "enable_search"]
    assert [(d["handle"], d["source"], d["id"]) for d in first[RETRIEVED]] == [
        ("D1", "wikipedia", "w2"), ("D2", "wikipedia", "w1"), ("D3", "pubmed", "doc3"), ("D4", "pubmed", "doc2"),
    ]  # fmt: skip
    top = first[RETRIEVED][0]
    assert top["first_stage_score"] == pytest.approx(1 / 3) and top["rerank_score"] == 10.0
    assert top["rank"] == 1 and top["duplicate"] is False
    # The same search again returns the same documents: no new handle, each named by the one the model knows.
    assert [(d["handle"], d["duplicate"]) for d in second[RETRIEVED]] == [
        (f"D{i}", True) for i in range(1, 5)
    ]
    assert first["result"]["new"] == ["D1", "D2", "D3", "D4"] and first["result"]["candidates"] == 5


def test_memory_snapshot_maps_reviewed_quoted_and_pruned_handles_to_documents() -> None:
    pred = _run_full()
    [memory] = [s for s in pred.trace if s["kind"] == "memory"]
    assert memory["grounded"] == ["D1"]
    assert memory["documents"]["D1"] == {"id": "w2", "source": "wikipedia"}
    assert set(memory["documents"]) >= {"D1", "D2"} and set(memory["pruned"]) <= set(memory["documents"])
    # The cited evidence carries the same corpus id.
    assert [(e["handle"], e["doc_id"], e["source"]) for e in pred.evidence] == [("D1", "w2", "wikipedia")]


def test_no_tools_search_records_its_documents() -> None:
    deps = AgentDeps(retriever=FakeRetriever(make_docs(4)), reranker=ReversingReranker(), json_schema=True)
    agent = build_agent(agent_config(mode="no_tools"), AgentModel([]), deps)
    pred = asyncio.run(agent.answer(Q))
    [retrieval] = [s for s in pred.trace if s["kind"] == "retrieval"]
    assert [d["handle"] for d in retrieval[RETRIEVED]] == [
        f"D{i}" for i in range(1, len(retrieval[RETRIEVED]) + 1)
    ]
    assert all(d["first_stage_score"] is not None for d in retrieval[RETRIEVED])


def test_a_memory_bank_that_disagrees_with_the_search_is_our_bug() -> None:
    docs = make_docs(2)
    with pytest.raises(ValueError, match="fewer documents"):
        search_records(docs, docs, ["D1"], {})
    with pytest.raises(ValueError, match="more documents"):
        search_records(docs, docs, ["D1", "D2", "D3"], {})


def test_trace_view_shows_the_documents_of_a_search() -> None:
    step = next(s for s in _run_full().trace if s.get("tool") == "enable_search")
    assert "docs: D1 wikipedia:w2 (0.333 -> 10)" in format_step(step, width=200)


def _traced_run(root: Path) -> Path:
    """A run whose one question searched twice and quoted one document (the trace of ``_run_full``)."""
    path = make_run(root, "full", mode="full", answers={}, gold_ids=["q2"])
    RunDir(path).append_predictions([dataclasses.replace(_run_full(), id="q2", benchmark="b1")])
    return path


def test_evidence_by_source_counts_retrieved_and_cited_documents(tmp_path: Path) -> None:
    _traced_run(tmp_path)
    runs, _ = load_runs([str(tmp_path / "*")])
    t = evidence_by_source(runs)
    rows = {r["source"]: r for r in t.records}
    # Four distinct documents retrieved (the second search's duplicates not counted again), one quote.
    assert (rows["wikipedia"]["retrieved"], rows["pubmed"]["retrieved"]) == (2, 2)
    assert (rows["wikipedia"]["cited"], rows["wikipedia"]["questions_citing"], rows["pubmed"]["cited"]) == (
        1,
        1,
        0,
    )


def test_gold_text_is_looked_for_in_the_retrieved_documents(tmp_path: Path) -> None:
    path = _traced_run(tmp_path)
    runs, _ = load_runs([str(path)])
    runs[0].config["index_dir"] = str(tmp_path)  # the lookup below stands in for the index's text store
    texts = {"w2": "Platelets: text-B blocks them.", "w1": "nothing", "doc3": "", "doc2": "context-B"}

    def lookup(index_dir: str, source: str, ids: Any) -> list[str | None]:
        return [texts.get(i) for i in ids]

    [rec] = gold_in_retrieved(runs, lookup).records
    assert (rec["searched"], rec["gold_in_retrieved"], rec["share"]) == (1, 1, 1.0)
    texts["w2"] = "text-Bx only"
    assert gold_in_retrieved(runs, lookup).records[0]["gold_in_retrieved"] == 0


def test_whole_word_match_of_the_gold_text() -> None:
    assert contains_gold("Clopidogrel", ["... CLOPIDOGREL, an inhibitor"])
    assert not contains_gold("Clopidogrel", ["clopidogrelic"]) and not contains_gold("", ["x"])
    assert contains_gold("Sjögren syndrome", ["sjogren  syndrome."])


def test_traces_without_provenance_still_load_and_count_as_untraced(tmp_path: Path) -> None:
    make_run(tmp_path, "old", mode="full", answers={"q1": "A"}, traces={"q1": ["enable_search"]})
    runs, _ = load_runs([str(tmp_path / "*")])
    assert runs[0].predictions[0].trace
    t = evidence_by_source(runs)
    assert t.records == [] and gold_in_retrieved(runs).records == []
    assert "\n" not in format_step(runs[0].predictions[0].trace[1])


def test_the_viewer_shows_a_kept_quote_inside_its_retrieved_document() -> None:
    from medagent.view.questions import documents

    pred = _run_full()
    docs = documents(pred.trace, pred.evidence)
    by_id = {d.get("id"): d for d in docs if d.get("id")}
    assert by_id["w2"]["source"] == "wikipedia" and by_id["w2"]["text"]
    quoted = [d for d in docs if d["quotes"]]
    assert quoted, "the run kept a quote"
    for d in quoted:
        for q in d["quotes"]:
            assert q["spans"], (q, d["text"][:200])


def test_the_questions_own_article_is_found_among_the_retrieved_and_absent_when_held_out(
    tmp_path: Path,
) -> None:
    from medagent.report.evidence import own_evidence_retrieved

    def docs(*doc_ids: str) -> list[dict[str, Any]]:
        return [{"kind": "retrieval", RETRIEVED: [{"id": f"{d}#0", "doc_id": d, "source": d.split(":")[0]}
                                                  for d in doc_ids]}]  # fmt: skip

    for name, found in (("own", docs("pubmedqa:111", "bioasq:9:ab")), ("held", docs("bioasq:9:ab"))):
        path = make_run(tmp_path, name, mode="full", answers={}, gold_ids=["q1", "q2"],
                        benchmark="pubmedqa")  # fmt: skip
        RunDir(path).append_predictions([
            Prediction(id="q1", benchmark="pubmedqa", answer="A", trace=found),
            Prediction(id="q2", benchmark="pubmedqa", answer="A", trace=docs("bioasq:9:ab")),
        ])  # fmt: skip
    runs = [load_runs([str(tmp_path / name)])[0][0] for name in ("own", "held")]  # one RunKey: load apart
    own = {"q1": frozenset({"pubmed:111"}), "q2": frozenset({"pubmed:222"})}
    table = own_evidence_retrieved(runs, lambda run: own)
    assert [(r["searched"], r["own_retrieved"], r["share"]) for r in table.records] == [
        (2, 1, 0.5),
        (2, 0, 0.0),
    ]
    # A benchmark without source articles adds no row.
    assert own_evidence_retrieved(runs, lambda run: {}).records == []
