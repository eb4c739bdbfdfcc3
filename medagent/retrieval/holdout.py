"""Each question's own evidence held out of what the agent retrieves (issue #35, item 7).

PubMedQA's questions are written from one PubMed abstract, and BioASQ's gold snippets are sentences of the
articles its experts cited: an index that holds those articles hands the agent its own evidence (MIRAGE's
setting). ``agent.retrieval.hold_out_own_evidence=true`` runs the same agent on the same index with each
question's own articles removed from every search result, so one index gives both settings.

The articles come from the benchmark row (``evidence_articles``: never the gold label, and never shown to
the agent: the worker sets them for the question in flight through a context variable, which each asyncio
task copies, so concurrent questions keep their own). ``HeldOutRetriever`` wraps the retriever client,
asks for more candidates, drops every document cut from a held-out article and keeps ``top_k`` per source.
A document's article is read from its id, in the formats our readers write (``article_of``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from medagent.api import MAX_TOP_K, Doc
from medagent.retrieval.readers import pmid_of
from medagent.types import Question

# The held-out articles (``pubmed:<pmid>``) of the question this task is answering.
HELD_OUT: ContextVar[frozenset[str]] = ContextVar("held_out_articles", default=frozenset())
# Candidates asked for beyond top_k, per held-out article: an abstract is 1-3 chunks, and BioASQ cites a
# handful of snippets per article.
EXTRA_PER_ARTICLE = 4
# ``pubmedqa:<pmid>`` (readers.read_pubmedqa), ``bioasq:<pmid>:<digest>`` (read_bioasq_snippets), and a chunk
# id of either (``<doc id>#<n>``).
_ARTICLE_ID = re.compile(r"^(?:pubmedqa|bioasq):(\d+)(?::|#|$)")


def article_of_id(text: str | None) -> str | None:
    """``pubmed:<pmid>`` of a document or chunk id in our readers' formats, else None."""
    if not text:
        return None
    if m := _ARTICLE_ID.match(text):
        return f"pubmed:{m.group(1)}"
    return text if text.startswith("pubmed:") else None


def article_of(doc: Doc) -> str | None:
    """``pubmed:<pmid>`` of the article a retrieved document was cut from, or None when its ids do not
    say (sources other than PubMedQA abstracts and BioASQ snippets are never held out)."""
    return next((a for a in map(article_of_id, (doc.doc_id, doc.id, doc.parent_id)) if a), None)


def evidence_articles(question: Question) -> frozenset[str]:
    """The PubMed articles a question was written from or cited as evidence: PubMedQA's own abstract (its
    id), BioASQ's ``metadata["documents"]``; empty for other benchmarks."""
    found: set[str] = set()
    if question.id.startswith("pubmedqa-"):
        found.add(f"pubmed:{question.id.removeprefix('pubmedqa-')}")
    for ref in question.metadata.get("documents") or ():
        if isinstance(ref, str) and (pmid := pmid_of(ref)):
            found.add(f"pubmed:{pmid}")
    return frozenset(found)


@contextmanager
def holding_out(articles: frozenset[str]) -> Iterator[None]:
    """Within this block (this task and those it starts), searches leave ``articles`` out."""
    token = HELD_OUT.set(articles)
    try:
        yield
    finally:
        HELD_OUT.reset(token)


class HeldOutRetriever:
    """A retriever client that leaves out the current question's own articles (``HELD_OUT``).

    Args:
        inner: The client (``RemoteRetriever``); its other attributes pass through.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        # Documents dropped so far by this client (for tests and debugging; no report reads it).
        self.dropped = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def retrieve(self, query: str, top_k: int, **kwargs: Any) -> list[Doc]:
        held = HELD_OUT.get()
        if not held:
            docs: list[Doc] = await self.inner.retrieve(query, top_k, **kwargs)
            return docs
        asked = min(MAX_TOP_K, top_k + EXTRA_PER_ARTICLE * len(held))
        found: list[Doc] = await self.inner.retrieve(query, asked, **kwargs)
        kept: list[Doc] = []
        per_source: dict[str, int] = {}
        for doc in found:  # best first
            if article_of(doc) in held:
                self.dropped += 1
                continue
            if per_source.get(doc.source, 0) < top_k:
                per_source[doc.source] = per_source.get(doc.source, 0) + 1
                kept.append(doc)
        return kept
