"""The closed sets of the configs, as enums: a typo in an override fails when hydra composes the config,
before any pipeline starts Ray, with the allowed values in the message.

Every member's name is its value: OmegaConf looks a string up by member *name*, writes a member back out
by name (``.hydra/config.yaml``), and ``Enum.__hash__`` hashes the name, so a member also finds a plain
string key in a dict. Members are ``str``s that print, format and serialise (``json.dumps``) as their
value, so run manifests, resume checks and string comparisons see the same plain strings as before.

Sets whose members are registered in code (agent modes, benchmark loaders) stay registries: their
configs check the name against the registry in ``__post_init__``, which ``OmegaConf.to_object`` runs at
the driver before Ray starts.
"""

from __future__ import annotations

import dataclasses
import typing
from enum import Enum
from typing import Any


class Choice(str, Enum):
    """A closed set of strings; members compare, print, repr and serialise as their plain value."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    def __repr__(self) -> str:  # error messages and config reprs read as they did with plain strings
        return repr(str(self.value))

    @classmethod
    def names(cls) -> list[str]:
        return [m.value for m in cls]


class Backend(Choice):
    """How the LLM is served (``LLMConfig.backend``)."""

    llamacpp = "llamacpp"
    vllm = "vllm"
    openai = "openai"


class ToolCalls(Choice):
    """How the agent's turns call tools (``LLMConfig.tool_calls``)."""

    native = "native"
    json_schema = "json_schema"


class ToolChoice(Choice):
    """``tool_choice`` of native agent turns (``LLMConfig.tool_choice``)."""

    auto = "auto"
    required = "required"


class PlacementStrategy(Choice):
    """Ray placement-group strategies of a vLLM replica's bundles (``ClusterLLMConfig.placement_strategy``)."""

    PACK = "PACK"
    SPREAD = "SPREAD"
    STRICT_PACK = "STRICT_PACK"
    STRICT_SPREAD = "STRICT_SPREAD"


class ProxyLocation(Choice):
    """Where Serve runs HTTP proxies (``ClusterServeConfig.proxy_location``)."""

    EveryNode = "EveryNode"
    HeadOnly = "HeadOnly"
    Disabled = "Disabled"


class LogLevel(Choice):
    """Python log levels by name (``ClusterServeConfig.log_level``)."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


class AuthMode(Choice):
    """Ray's ``RAY_AUTH_MODE`` for the drivers a pipeline starts (``RayInitConfig.auth_mode``)."""

    token = "token"


class RetrievalMode(Choice):
    """First-stage retrieval: dense vectors, BM25, or both fused by reciprocal rank."""

    dense = "dense"
    bm25 = "bm25"
    hybrid = "hybrid"


class Memory(Choice):
    """What the QA agent's search does with its results (``AgentConfig.memory``): the memory bank of the
    paper (Jia et al.), straight into the conversation ("w/o Cache & Prune"), or nothing."""

    cache_prune = "cache_prune"
    # The memory bank as the paper describes it: the grounded documents themselves are kept (cut to
    # ``doc_max_chars``) and the final answer reads them; ``cache_prune`` keeps only verified quotes.
    documents = "documents"
    context = "context"
    none = "none"


class FinalAnswerCall(Choice):
    """When the QA agent makes its last answer call (``AgentConfig.final_answer_call``)."""

    always = "always"
    fallback = "fallback"


class Confidence(Choice):
    """How the gated agent measures its first answer's confidence (``GateConfig.confidence``)."""

    auto = "auto"
    logprobs = "logprobs"
    samples = "samples"


class AnnotatorKind(Choice):
    """Which interview annotator runs (``AnnotatorConfig.kind``)."""

    lexicon = "lexicon"
    llm = "llm"


class HistoryMode(Choice):
    """The history-taking agent (``HistoryAgentConfig.mode``): adaptive Markov questioning, or the
    single-shot baseline of the paper (Jabbar et al.)."""

    amq = "amq"
    single_shot = "single_shot"


class Policy(Choice):
    """How the history-taking agent picks the next slot (``QuestioningConfig.policy``)."""

    order = "order"
    information = "information"


class Priorities(Choice):
    """Which priority order of ``conf/interview/priorities.yaml`` the history-taking agent follows."""

    paper = "paper"
    physician = "physician"


class SummaryContext(Choice):
    """What the single-shot agent's one summary reads (``SingleShotConfig.context``)."""

    opening = "opening"
    full = "full"
    transcript_run = "transcript_run"


class PatientKind(Choice):
    """Who answers the agent in an evaluated interview (``InterviewEvalConfig.patient``;
    ``medagent.history.simulation``): the LLM shown transcript excerpts, the real patient's words for the
    closest physician question, or an LLM that answers only from the case's extracted facts."""

    simulator = "simulator"
    replay = "replay"
    facts = "facts"


class ReplayKeys(Choice):
    """What the replay patient compares a question with (``InterviewEvalConfig.replay_keys``;
    ``medagent.history.simulation.replay.exchange_keys``): each exchange's doctor text whole, or also each
    of its sentences and the tail of each sentence after every comma (fillers and a second question in one
    turn then cost no similarity)."""

    exchange = "exchange"
    clauses = "clauses"


class ChunkingMode(Choice):
    """How an indexed corpus is cut (``ChunkingConfig.mode``): plain chunks, or children of parents."""

    plain = "plain"
    parent_child = "parent_child"


class Metric(Choice):
    """How an embedder's vectors are compared (``EmbedderConfig.metric``): L2 distance or inner product."""

    l2 = "l2"
    ip = "ip"


class Pooling(Choice):
    """Pooling forced on a plain transformers checkpoint (``EmbedderConfig.pooling``)."""

    cls = "cls"
    mean = "mean"


class IndexKind(Choice):
    """The FAISS index of each source (``IndexConfig.kind``): exact, IVF-PQ or HNSW."""

    flat = "flat"
    ivfpq = "ivfpq"
    hnsw = "hnsw"


class HnswStorage(Choice):
    """Vectors stored in an HNSW graph (``IndexConfig.hnsw_storage``)."""

    flat = "flat"
    sq8 = "sq8"
    pq = "pq"


_FIELDS: dict[type, tuple[tuple[str, type[Choice]], ...]] = {}


def _choice_fields(cls: type) -> tuple[tuple[str, type[Choice]], ...]:
    if cls in _FIELDS:
        return _FIELDS[cls]
    hints = typing.get_type_hints(cls)
    found = []
    for f in dataclasses.fields(cls):
        args = typing.get_args(hints[f.name]) or (hints[f.name],)
        enum = next((a for a in args if isinstance(a, type) and issubclass(a, Choice)), None)
        if enum is not None:
            found.append((f.name, enum))
    _FIELDS[cls] = tuple(found)
    return _FIELDS[cls]


def coerce_choices(config: Any, section: str) -> None:
    """Turns the strings in ``config``'s enum fields into members, so a config built in Python is checked
    like a composed one.

    Args:
        config: A config dataclass.
        section: Where it sits in the composed config (``agent``, ``agent.gate``), named in the error.

    Raises:
        ValueError: A value outside its set, naming the field and the allowed values.
    """
    for name, enum in _choice_fields(type(config)):
        value = getattr(config, name)
        if value is None or isinstance(value, enum):
            continue
        try:
            setattr(config, name, enum(value))
        except ValueError:
            raise ValueError(
                f"{section}.{name} must be one of {', '.join(enum.names())}, got {value!r}"
            ) from None
