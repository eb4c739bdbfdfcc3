"""Wire models of the serving API (``/v1/chat/completions``, ``/v1/retrieve``, ``/v1/rerank``): the contract between the Serve
application, its deployments and their callers. Pure pydantic, so clients import it without Ray.

Limits are part of the contract (every one is listed in ``docs/LIMITS.md``): an oversized query, ``top_k``,
candidate list or message list is refused with 422 before any model runs. The chat request is an
allow-list: an unknown field (``n_probs``, ``n_predict``, ...) is refused, never passed to the engine, so
no field can override a checked limit.

``Doc`` is the one retrieved-document type past the text store: the searcher returns it, the retriever
deployment answers with it, the clients parse it back and the agents hold it. It is a plain dataclass
that pydantic validates as a field of ``RetrieveResponse``, so no layer converts it into another type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

MAX_QUERY_CHARS = 4096
MAX_QUERY_ID_CHARS = 256
MAX_TOP_K = 256
# Set by measured CPU cost (benchmarks/bench_rerank_limits.py): the CPU reranker reads at most
# max_seq_length=256 tokens of a candidate (the GPU one 512, about 2,000-2,500 characters), so a candidate
# costs about the same from ~1,200 characters up, and a request at both maxima is scored in seconds on
# the CPU tier. Callers with more candidates send several requests (``RemoteReranker`` does).
MAX_CANDIDATES = 32
MAX_CANDIDATE_CHARS = 4000
# The chat route: messages per request, characters of one message's text, tools per request.
MAX_MESSAGES = 256
MAX_MESSAGE_CHARS = 100_000
MAX_TOOLS = 64
MAX_TOP_LOGPROBS = 20
MAX_STOP = 4
# Every JSON body: bytes and nesting depth, checked on the raw bytes before parsing (``actors.http_edge``).
MAX_BODY_BYTES = 2_000_000
MAX_JSON_DEPTH = 32


def _no_lone_surrogates(text: str) -> str:
    """A lone UTF-16 surrogate (JSON ``"\\ud800"``) is valid JSON but not text: the engine cannot encode it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("contains a lone UTF-16 surrogate (not valid text)") from None
    return text


def _strings_are_text(value: Any) -> Any:
    """``_no_lone_surrogates`` over every string of a JSON value (keys too); depth is bounded at the edge."""
    if isinstance(value, str):
        _no_lone_surrogates(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _strings_are_text(k)
            _strings_are_text(v)
    elif isinstance(value, list):
        for v in value:
            _strings_are_text(v)
    return value


Text = Annotated[str, AfterValidator(_no_lone_surrogates)]
JsonObject = Annotated[dict[str, Any], AfterValidator(_strings_are_text)]


class RetrieveRequest(BaseModel):
    """TopK per source from the first-stage retriever."""

    model_config = ConfigDict(extra="forbid")
    query: Text = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    top_k: int = Field(32, ge=1, le=MAX_TOP_K, description="results per source (the QA paper: 32)")
    sources: list[Text] | None = Field(None, max_length=64, description="sources to search (default: all)")
    mode: Literal["dense", "bm25", "hybrid"] | None = Field(None, description="default: the retriever's")
    return_parents: bool | None = Field(
        None, description="search children, return parents (the history-taking paper)"
    )
    query_id: Text = Field("q", max_length=MAX_QUERY_ID_CHARS)


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
    id: Text = Field(min_length=1, max_length=MAX_QUERY_ID_CHARS)
    text: Text = Field(max_length=MAX_CANDIDATE_CHARS)


class RerankRequest(BaseModel):
    """Scores ``candidates`` against ``query`` and keeps the best ``top_r``."""

    model_config = ConfigDict(extra="forbid")
    query: Text = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    candidates: list[RerankCandidate] = Field(min_length=1, max_length=MAX_CANDIDATES)
    top_r: int | None = Field(
        None, ge=1, le=MAX_CANDIDATES, description="default: the reranker's (the QA paper: 32)"
    )


class RerankResponse(BaseModel):
    results: dict[str, float]


_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)


class TextPart(BaseModel):
    """One part of a message's content: text only (this server runs no vision model)."""

    model_config = _STRICT
    type: Literal["text"]
    text: Text = Field(max_length=MAX_MESSAGE_CHARS)


class FunctionCall(BaseModel):
    model_config = _STRICT
    name: Text = Field(min_length=1, max_length=256)
    arguments: Text = Field(max_length=MAX_MESSAGE_CHARS, description="JSON text, as OpenAI sends it")


class ToolCall(BaseModel):
    model_config = _STRICT
    id: Text = Field(min_length=1, max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    model_config = _STRICT
    role: Literal["system", "user", "assistant", "tool"]
    content: (
        Annotated[Text, Field(max_length=MAX_MESSAGE_CHARS)]
        | Annotated[list[TextPart], Field(max_length=MAX_TOOLS)]
        | None
    ) = None
    name: Text | None = Field(None, max_length=256)
    tool_calls: list[ToolCall] | None = Field(None, max_length=MAX_TOOLS)
    tool_call_id: Text | None = Field(None, max_length=256)


class FunctionSpec(BaseModel):
    model_config = _STRICT
    name: Text = Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_.-]+$")
    description: Text | None = Field(None, max_length=MAX_MESSAGE_CHARS)
    parameters: JsonObject | None = None
    strict: bool | None = None


class ToolSpec(BaseModel):
    model_config = _STRICT
    type: Literal["function"]
    function: FunctionSpec


class NamedToolChoice(BaseModel):
    model_config = _STRICT
    type: Literal["function"]
    function: dict[Literal["name"], Text]


class ResponseFormat(BaseModel):
    model_config = _STRICT
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonObject | None = None
    schema_: JsonObject | None = Field(None, alias="schema")


class ChatCompletionRequest(BaseModel):
    """The subset of the OpenAI request the CPU engine honours, each field bounded; any other field is
    refused (422), so an engine option (``n_probs``, ``n_predict``) never reaches the engine."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True)
    model: Text | None = Field(None, max_length=256)
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    tools: list[ToolSpec] | None = Field(None, max_length=MAX_TOOLS)
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    response_format: ResponseFormat | None = None
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(512, ge=1)
    seed: int | None = Field(None, ge=0, lt=2**32)
    stop: Text | Annotated[list[Text], Field(max_length=MAX_STOP)] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    n: Literal[1] | None = None
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    stream: Literal[False] = False

    @model_validator(mode="after")
    def _tool_choice_needs_tools(self) -> ChatCompletionRequest:
        if self.tool_choice not in (None, "none", "auto") and not self.tools:
            raise ValueError("tool_choice names a tool but the request has no tools")
        return self

    def engine_body(self) -> dict[str, Any]:
        """The body the engine gets: the validated fields only, OpenAI's names."""
        return self.model_dump(exclude_none=True, by_alias=True)


MAX_ANSWER_CHARS = 4000


class InterviewAnswerRequest(BaseModel):
    """The patient's answer to the pending question of a history-taking session."""

    model_config = ConfigDict(extra="forbid")
    answer: str = Field(min_length=1, max_length=MAX_ANSWER_CHARS)


class InterviewStartRequest(BaseModel):
    """A session start: a JSON object (``{}``), so a start is a JSON request a browser preflights across
    origins, never a form post another site's page can send."""

    model_config = ConfigDict(extra="forbid")


class InterviewSessionResponse(BaseModel):
    """A history-taking session: the pending question while ``asking``, the assessment once ``finished``.

    ``state`` (the agent's full ``InterviewState``: slots, differential, asked questions, red flags, phase)
    comes with ``GET /v1/interview/sessions/{id}`` only; ``token`` with the start only: every later call
    on the session sends it back in the ``X-Session-Token`` header.
    """

    session_id: str
    token: str | None = None
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
