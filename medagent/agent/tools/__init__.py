"""The QA paper's five tools (and ``final_answer``), one module each behind the ``TOOLS`` registry.

A mode's tool set and memory kind come from its config (``AgentConfig.tools`` / ``AgentConfig.memory``,
``conf/agent/*.yaml``); ``MODE_DEFAULTS`` fills them in for configs that leave them out. Schemas for the
model (``tool_schemas`` for ``tools=``, ``call_schema`` for one constrained call) are built from the tool
classes, so what the model is told and what runs cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from medagent.agent.tools import compare, locate, options, relevance, search  # noqa: F401  (registration)
from medagent.agent.tools.answer import ANSWER_TOOL
from medagent.agent.tools.base import Tool, ToolContext, ToolResult
from medagent.agent.tools.registry import TOOLS
from medagent.agent.tools.search import search_docs, search_stages
from medagent.config import AgentConfig

# The tools and memory kind of each QA mode when its config does not list them (the paper's ablations
# remove tools, never change the loop): full = the QA paper; no_cache_prune = "w/o Cache & Prune";
# no_search = "w/o Evidence Search".
MODE_DEFAULTS: dict[str, tuple[tuple[str, ...], str]] = {
    "full": (("perform_comparison", "enable_search", "relevance_analysis", "locate_evidence"), "cache_prune"),
    "no_cache_prune": (("perform_comparison", "enable_search"), "context"),
    "no_search": (("perform_comparison",), "none"),
}
# Room for one short thought before each constrained call (the model cannot reason anywhere else); the
# default of ``agent.loop.thought_chars``.
THOUGHT_CHARS = 300
# Each tool's schema as a plain mapping (description, parameters, required), by name.
SPECS: dict[str, dict[str, Any]] = {
    n: {"description": t.description, "parameters": dict(t.parameters), "required": list(t.required)}
    for n in TOOLS
    for t in [TOOLS.get(n)]
}


def mode_tools(cfg: AgentConfig) -> tuple[list[str], str]:
    """The mode's tools (without ``final_answer``) and its memory kind: the config's, else the defaults."""
    tools, memory = MODE_DEFAULTS.get(cfg.mode, ((), "none"))
    names = list(cfg.loop.tools) if cfg.loop.tools is not None else list(tools)
    kind = cfg.loop.memory if cfg.loop.memory is not None else memory
    unknown = [n for n in names if n not in TOOLS or n == ANSWER_TOOL]
    if unknown:
        raise ValueError(f"agent.loop.tools of mode {cfg.mode!r}: unknown {unknown}; known: {TOOLS.names()}")
    return names, kind


def tool_names(cfg: AgentConfig, open_ended: bool) -> list[str]:
    """The tools offered; open-ended questions add ``generate_options`` (paper: built on the same four)."""
    names = mode_tools(cfg)[0]
    if open_ended and "generate_options" not in names:
        names.insert(0, "generate_options")
    return [*names, ANSWER_TOOL]


def searches(cfg: AgentConfig) -> bool:
    """Whether the mode's tools search (the pipelines then deploy the retriever and reranker)."""
    return any(TOOLS.get(n).searches for n in mode_tools(cfg)[0])


def _params(n: str, letters: list[str] | None) -> dict[str, Any]:
    if n == ANSWER_TOOL and letters:
        return {"answer": {"type": "string", "enum": letters, "description": "the option letter"}}
    return dict(TOOLS.get(n).parameters)


def tool_schemas(names: list[str], letters: list[str] | None = None) -> list[dict[str, Any]]:
    """OpenAI ``tools=`` entries for ``names``; ``letters`` restricts ``final_answer`` to the option letters
    of a multiple-choice question (as ``call_schema`` does), so guided decoding cannot write prose there."""
    out = []
    for n in names:
        tool = TOOLS.get(n)
        parameters = {"type": "object", "properties": _params(n, letters), "required": list(tool.required)}
        out.append(
            {
                "type": "function",
                "function": {"name": n, "description": tool.description, "parameters": parameters},
            }
        )
    return out


def call_schema(
    names: list[str], letters: list[str] | None = None, *, thought_chars: int = THOUGHT_CHARS
) -> dict[str, Any]:
    """A ``response_format`` that makes one agent turn exactly one call to one of ``names``.

    For backends that follow JSON schemas but not function calling (the CPU llama.cpp model answers
    ``tools=`` with prose): the model still chooses the tool and its arguments, decoding only guarantees
    the shape — the same guided decoding vLLM uses for ``tool_choice="required"``. ``letters`` restricts
    ``final_answer`` to the option letters of a multiple-choice question; ``thought_chars`` bounds the
    thought written before the call.
    """
    variants = []
    for n in names:
        tool = TOOLS.get(n)
        params: dict[str, Any] = {} if tool.question_default else dict(tool.parameters)
        required: list[str] = [] if tool.question_default else list(tool.required)
        if n == ANSWER_TOOL and letters:
            params = {"answer": {"type": "string", "enum": letters}}
        variants.append(
            {
                "type": "object",
                "properties": {
                    "thought": {"type": "string", "maxLength": thought_chars},
                    "name": {"const": n},
                    "arguments": {
                        "type": "object",
                        "properties": params,
                        "required": required,
                        "additionalProperties": False,
                    },
                },
                "required": ["thought", "name", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": {"anyOf": variants}}}


async def run_tool(name: str, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """Runs one call of a registered tool (``ToolError`` for the model's mistakes)."""
    tool: Tool = TOOLS.get(name)()
    return await tool.run(ctx, args)


__all__ = [
    "ANSWER_TOOL", "MODE_DEFAULTS", "SPECS", "THOUGHT_CHARS", "TOOLS", "Tool", "ToolContext",
    "ToolResult", "call_schema", "mode_tools", "run_tool", "search_docs", "search_stages", "searches", "tool_names",
    "tool_schemas",
]  # fmt: skip
