"""Where a run's evidence came from: documents retrieved and quoted per source, how often the gold
answer's text was in what the searches returned, and how often a question's own source article was
(PubMedQA, BioASQ: ``medagent.retrieval.holdout``).

Read from the run directory alone: each search step's documents (``medagent.agent.provenance``) and each
prediction's evidence records. The gold text joins here, in the report, never in the agent. Traces written
before search steps recorded their documents count as untraced for these tables (a note says how many).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from medagent.agent.provenance import RETRIEVED
from medagent.report.loader import Run, labels
from medagent.report.table import Table, pct

# ``(index_dir, source, ids) -> texts`` (None where the store holds no such id); the report's default reads
# the index's text store.
TextLookup = Callable[[str, str, Sequence[str]], list[str | None]]
# ``run -> {question id: its own source articles}`` (empty for benchmarks without them); the report's default
# reads the run's benchmark rows.
ArticleLookup = Callable[[Run], dict[str, frozenset[str]]]


def retrieved_docs(trace: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every document a question's searches returned (search tools and the no-tools baseline's search)."""
    return [d for step in trace for d in (step.get(RETRIEVED) or ())]


def _quotes(evidence: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Evidence the agent grounded its answer in: verified quotes and documents placed whole in context."""
    return [e for e in evidence if e.get("verified") or e.get("kind") == "context"]


def evidence_by_source(runs: Sequence[Run]) -> Table:
    """Per run and source: documents retrieved, quoted (cited) evidence, and questions citing the source."""
    t = Table("evidence_by_source", "Evidence by source (retrieved documents and cited evidence)")
    t.columns = ["run", "source", "retrieved", "retrieved %", "cited", "cited %", "questions citing"]
    names = labels(runs)
    for run in runs:
        retrieved: Counter[str] = Counter()
        cited: Counter[str] = Counter()
        citing: Counter[str] = Counter()
        for p in run.predictions:
            retrieved.update(d["source"] for d in retrieved_docs(p.trace) if not d.get("duplicate"))
            sources = [e.get("source", "") for e in _quotes(p.evidence)]
            cited.update(sources)
            citing.update(set(sources))
        if not retrieved and not cited:
            continue
        n_ret, n_cit = sum(retrieved.values()), sum(cited.values())
        for source in sorted(set(retrieved) | set(cited)):
            name = names[run.path]
            ret_share = retrieved[source] / n_ret if n_ret else None
            cit_share = cited[source] / n_cit if n_cit else None
            rec: dict[str, Any] = {
                "run": name,
                "source": source,
                "retrieved": retrieved[source],
                "retrieved_share": ret_share,
                "cited": cited[source],
                "cited_share": cit_share,
                "questions_citing": citing[source],
            }
            t.records.append(rec)
            t.cells.append(
                [
                    name,
                    source,
                    str(retrieved[source]),
                    pct(ret_share),
                    str(cited[source]),
                    pct(cit_share),
                    str(citing[source]),
                ]
            )
    untraced = [
        names[r.path]
        for r in runs
        if r.predictions and not any(retrieved_docs(p.trace) for p in r.predictions)
    ]
    if untraced:
        t.notes.append(
            "retrieved counts need traces whose search steps name their documents; none in: "
            + ", ".join(untraced)
        )
    return t


def normalize(text: str) -> str:
    """Casefolded, accents and punctuation dropped, whitespace collapsed: how a gold text is looked for."""
    text = unicodedata.normalize("NFKD", text).casefold()
    text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(re.sub(r"[^\w]+", " ", text).split())


def contains_gold(gold_text: str, texts: Iterable[str | None]) -> bool:
    """Whether the gold answer's text occurs, as whole words, in any of ``texts``."""
    needle = normalize(gold_text)
    if not needle:
        return False
    pattern = re.compile(rf"(?<!\w){re.escape(needle)}(?!\w)")
    return any(t and pattern.search(normalize(t)) for t in texts)


def store_lookup(index_dir: str, source: str, ids: Sequence[str]) -> list[str | None]:
    """Texts of ``ids`` from the index's text store for ``source`` (None where it lacks one)."""
    from medagent.retrieval.layout import IndexLayout
    from medagent.retrieval.store import TextStore

    store = TextStore(IndexLayout(index_dir).store_stem(source))
    rows = store.find(list(ids))
    found = {int(r): row.content for r, row in zip(rows[rows >= 0], store.read(rows[rows >= 0]), strict=True)}
    return [found.get(int(r)) for r in rows]


def gold_in_retrieved(runs: Sequence[Run], lookup: TextLookup = store_lookup) -> Table:
    """Per traced run: the share of questions whose gold answer text occurs in a document its searches
    returned, read back from the index the run searched (``index_dir`` in its manifest)."""
    t = Table("gold_in_retrieved", "Gold answer text in the retrieved documents (traced runs)")
    t.columns = ["run", "questions searched", "gold in retrieved", "share"]
    names = labels(runs)
    for run in runs:
        searched = [(p, retrieved_docs(p.trace)) for p in run.predictions]
        searched = [(p, docs) for p, docs in searched if docs]
        if not searched:
            continue
        index_dir = str(run.config.get("index_dir") or "")
        try:
            texts = _texts(index_dir, [d for _, docs in searched for d in docs], lookup)
        except (OSError, ValueError) as exc:
            t.notes.append(f"{names[run.path]}: the index {index_dir!r} cannot be read ({exc})")
            continue
        hits = 0
        for p, docs in searched:
            gold = run.golds.get(p.id)
            if gold is not None and contains_gold(
                gold.answer_text, (texts.get((d["source"], d["id"])) for d in docs)
            ):
                hits += 1
        share = hits / len(searched)
        name = names[run.path]
        t.records.append({"run": name, "searched": len(searched), "gold_in_retrieved": hits, "share": share})
        t.cells.append([name, str(len(searched)), str(hits), pct(share)])
    if t.records:
        t.notes.append(
            "whole-word match of the gold option's text, casefolded and without punctuation, in any document a "
            "search returned; short gold texts (yes / no, a number) match often by chance"
        )
    return t


def _texts(
    index_dir: str, docs: Sequence[dict[str, Any]], lookup: TextLookup
) -> dict[tuple[str, str], str | None]:
    if not index_dir or not Path(index_dir).exists():
        raise ValueError("no such index folder")
    by_source: dict[str, list[str]] = {}
    for d in docs:
        by_source.setdefault(d["source"], []).append(d["id"])
    out: dict[tuple[str, str], str | None] = {}
    for source, ids in by_source.items():
        unique = list(dict.fromkeys(ids))
        out.update(
            {(source, i): text for i, text in zip(unique, lookup(index_dir, source, unique), strict=True)}
        )
    return out


def benchmark_articles(run: Run) -> dict[str, frozenset[str]]:
    """Each question's own source articles, from the questions the run recorded (``questions.jsonl``), else
    from its benchmark's rows (runs made before it was written)."""
    from medagent.data import load_benchmark
    from medagent.retrieval.holdout import evidence_articles
    from medagent.run import RunDir

    bench = run.config.get("benchmark") or {}
    name = str(bench.get("name") or run.key.benchmark)
    if not name.startswith(("pubmedqa", "bioasq")):
        return {}
    questions = list(RunDir(run.path, read_only=True).load_questions().values())
    if not questions:
        loader = str(bench.get("loader") or name)
        questions = [
            q
            for q, _ in load_benchmark(
                loader, run.config.get("data_root"), **(bench.get("options") or {})
            ).pairs
        ]
    return {q.id: evidence_articles(q) for q in questions}


def own_evidence_retrieved(runs: Sequence[Run], articles: ArticleLookup = benchmark_articles) -> Table:
    """Per traced run of a benchmark whose questions have source articles: the share of searched questions
    whose searches returned a document cut from the question's own article. MIRAGE's setting puts them in
    the index; ``agent=full_held_out`` leaves them out (its share must be 0)."""
    from medagent.retrieval.holdout import article_of_id

    t = Table("own_evidence_retrieved", "The question's own source article among the retrieved documents")
    t.columns = ["run", "questions searched", "own article retrieved", "share"]
    names = labels(runs)
    for run in runs:
        searched = [(p, docs) for p in run.predictions if (docs := retrieved_docs(p.trace))]
        if not searched:
            continue
        try:
            own = articles(run)
        except (OSError, ValueError) as exc:
            t.notes.append(f"{names[run.path]}: the benchmark's rows cannot be read ({exc})")
            continue
        if not own:
            continue
        hits = sum(
            any(article_of_id(d.get("doc_id") or d.get("id")) in own.get(p.id, frozenset()) for d in docs)
            for p, docs in searched
        )
        share = hits / len(searched)
        t.records.append(
            {"run": names[run.path], "searched": len(searched), "own_retrieved": hits, "share": share}
        )
        t.cells.append([names[run.path], str(len(searched)), str(hits), pct(share)])
    return t
