"""What QA agents need besides the LLM: retrieval and reranking (``medagent.services``) and backend facts.

The agents only see these protocols. ``medagent.agent.remote_services`` implements them over a Serve
deployment handle (no HTTP hop inside the cluster) or over the HTTP routes of a running application
(``actors.common.services_for`` picks); tests pass in-memory fakes. Documents are ``medagent.api.Doc``, the
one document type from the searcher through the wire to the agents (imported here for the agents' use).
"""

from __future__ import annotations

from dataclasses import dataclass

from medagent.services import Doc, Reranker, Retriever

__all__ = ["AgentDeps", "Doc", "Reranker", "Retriever"]


@dataclass(frozen=True)
class AgentDeps:
    """What an agent is given besides the LLM and its config: services and what the backend can do.

    Attributes:
        retriever: First-stage retrieval; required by the modes that search.
        reranker: Second-stage reranking; required by the modes that search.
        json_schema: The backend honours ``response_format`` JSON schemas (``llm.supports_json_schema``).
        tool_calls: How agent turns call tools: ``native`` (``tools=``) or ``json_schema`` (each turn decoded
            under a one-call schema; ``llm.tool_calls``).
        tool_choice: ``tool_choice`` of native agent turns (``llm.tool_choice``).
        logprobs: The backend returns token logprobs (``llm.supports_logprobs``; the gated agent's confidence).
    """

    retriever: Retriever | None = None
    reranker: Reranker | None = None
    json_schema: bool = True
    tool_calls: str = "native"
    tool_choice: str | None = None
    logprobs: bool = True
