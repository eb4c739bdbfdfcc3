"""Wire models of the serving API (``/v1/chat/completions``, ``/v1/retrieve``, ``/v1/rerank``): the contract between the Serve
application, its deployments and their callers. Pure pydantic, so clients import it without Ray.

Limits are part of the contract: an oversized query, ``top_k`` or candidate list is refused with 422
before any model runs.

``Doc`` is the one retrieved-document type past the text store: the searcher returns it, the retriever
deployment answers with it, the clients parse it back and the agents hold it. It is a plain dataclass
that pydantic validates as a field of ``RetrieveResponse``, so no layer converts it into another type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_QUERY_CHARS = 4096
MAX_TOP_K = 256
MAX_CANDIDATES = 1024
MAX_CANDIDATE_CHARS = 20_000


class RetrieveRequest(BaseModel):
    """TopK per source from the first-stage retriever."""

    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    top_k: int = Field(32, ge=1, le=MAX_TOP_K, description="results per source (the QA paper: 32)")
    sources: list[str] | None = Field(None, description="sources to search (default: all)")
    mode: Literal["dense", "bm25", "hybrid"] | None = Field(None, description="default: the retriever's")
    return_parents: bool | None = Field(
        None, description="search children, return parents (the history-taking paper)"
    )
    query_id: str = "q"


@dataclass(frozen=True)
class Doc:
    """One retrieved document: a chunk, or its parent in parent-child search.

    Attributes:
        id: The chunk or parent id the index returned (unique per source; the key in ``results``).
        source: Source label (``pubmed``, ``textbooks``, ...).
        title: Title of the document it was cut from.
        content: Text.
        score: Retrieval or rerank score, higher is better (0.0 for a document looked up by id).
        doc_id: The source document it was cut from.
        parent_id: For a chunk, the unit parent search returns; for a parent, its own parent (or None).
    """

    id: str
    source: str
    title: str
    content: str
    score: float = 0.0
    doc_id: str = ""
    parent_id: str | None = None


class RetrieveResponse(BaseModel):
    """BEIR-shaped ``results`` (doc id -> score, best first) plus the documents themselves."""

    query_id: str
    results: dict[str, float]
    documents: list[Doc]


class RerankCandidate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    text: str = Field(max_length=MAX_CANDIDATE_CHARS)


class RerankRequest(BaseModel):
    """Scores ``candidates`` against ``query`` and keeps the best ``top_r``."""

    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    candidates: list[RerankCandidate] = Field(min_length=1, max_length=MAX_CANDIDATES)
    top_r: int | None = Field(
        None, ge=1, le=MAX_CANDIDATES, description="default: the reranker's (the QA paper: 32)"
    )


class RerankResponse(BaseModel):
    results: dict[str, float]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """The subset of the OpenAI request the CPU engine honours; unknown fields pass through."""

    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    response_format: dict[str, Any] | None = None
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(512, ge=1)
    seed: int | None = None
    stream: Literal[False] = False


MAX_ANSWER_CHARS = 4000


class InterviewAnswerRequest(BaseModel):
    """The patient's answer to the pending question of a history-taking session."""

    model_config = ConfigDict(extra="forbid")
    answer: str = Field(min_length=1, max_length=MAX_ANSWER_CHARS)


class InterviewSessionResponse(BaseModel):
    """A history-taking session: the pending question while ``asking``, the assessment once ``finished``.

    ``state`` (the agent's full ``InterviewState``: slots, differential, asked questions, red flags, phase)
    comes with ``GET /v1/interview/sessions/{id}`` only.
    """

    session_id: str
    status: Literal["asking", "finished"]
    question: str | None = None
    turn: int
    phase: str
    red_flags: list[str] = Field(default_factory=list)
    scores: dict[str, float] = Field(default_factory=dict)
    finish_reason: str | None = None
    assessment: dict[str, Any] | None = None
    expires_in_s: float
    state: dict[str, Any] | None = None
