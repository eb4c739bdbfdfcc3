"""Recipes: which method the other config groups were set for (``conf/recipe/``), and how a run departs
from the QA paper's method (Jia et al.).

``recipe=paper`` sets every knob of the method in one place (``conf/recipe/paper.yaml``); models and
hardware stay their own groups, so the same recipe runs on the paper's 72B or on a CPU stand-in. Whatever
differs from the paper then is listed by ``departures``, recorded in each run's manifest and printed by the
report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class RecipeConfig:
    """The method the run's groups were set for.

    Attributes:
        name: ``default`` (our own defaults) or ``paper`` (the QA paper's method).
        item_suffix: Appended to the name of a benchmark that has a paper item set (``usmle_step1`` ->
            ``usmle_step1_paper``): ``_paper`` under ``recipe=paper``, so a benchmark named on the command
            line or swept by an experiment reads the paper's items.
        memory: The full agent's memory bank (``conf/agent/full.yaml`` reads it): ``cache_prune`` keeps
            verified quotes, ``documents`` the grounded documents (the paper's). Set here, not on
            ``agent.loop.memory``, so the ablations that change the memory keep theirs under any recipe.
    """

    name: str = "default"
    item_suffix: str = ""
    memory: str = "cache_prune"


# The QA paper's method, as flat dotted keys of a run's config -> (value, what it is in the paper's words).
PAPER_METHOD: dict[str, tuple[Any, str]] = {
    "agent.retrieval.top_k": (32, "TopK 32 per source"),
    "agent.retrieval.top_r": (32, "TopR 32"),
    "agent.loop.batch_size": (4, "B = 4 documents per review batch"),
    "agent.loop.max_conversation_tokens": (8192, "8,192 tokens per conversation"),
    "agent.loop.memory": ("documents", "a memory bank of the grounded documents"),
    "agent.loop.feedback": ("qa_tools_plain", "tool results without next-step hints"),
    "agent.answer.constrained_answer": (False, "free-text answers, the letter extracted"),
    "agent.answer.retry_invalid": (True, "an unreadable answer re-run at temperature 0.7 / top_p 0.8"),
    "agent.answer.retry_temperature": (0.7, "re-run temperature 0.7"),
    "agent.answer.retry_top_p": (0.8, "re-run top_p 0.8"),
    "agent.sampling.temperature": (0.0, "temperature 0"),
    "agent.sampling.top_p": (1.0, "top_p 1"),
    "agent.retrieval.no_tools_docs": (3, "the top 3 documents for the model without tools"),
    "retriever.mode": ("dense", "dense retrieval (SPECTER, L2)"),
    "reranker.name": ("gte-qwen2-7b-4bit", "gte-Qwen2-7B-instruct quantized to 4 bits as reranker"),
    "reranker.load_in_4bit": (True, "the reranker in 4 bits"),
}
# Agent modes whose runs use the tool loop's and the retrieval's settings (the others never read them).
TOOL_MODES = frozenset({"full", "no_cache_prune", "no_search", "gated"})
SEARCH_KEYS = ("agent.retrieval.", "agent.loop.memory", "retriever.", "reranker.", "agent.loop.batch_size")
PAPER_LLM = "qwen2.5-72b-instruct"
PAPER_TP = 4
PAPER_EMBEDDERS = frozenset({"allenai-specter", "specter"})
# The benchmarks of the paper's tables and the loader of each one's item set (medagent/data/paper.py).
PAPER_LOADERS = {
    "usmle_step1_paper",
    "usmle_step2_paper",
    "usmle_step3_paper",
    "medqa_paper",
    "medexpqa_paper",
}


def _get(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _value(v: Any) -> Any:
    # Enums arrive as their value or their "Class.member" text, depending on how the config was dumped.
    text = str(getattr(v, "value", v))
    return text.rsplit(".", 1)[-1] if text.startswith(("Memory.", "RetrievalMode.")) else v


def departures(config: Mapping[str, Any], index: Mapping[str, Any] | None = None) -> list[str]:
    """Where a run's settings differ from the QA paper's method, one sentence each (empty: none found).

    Args:
        config: The run's config as its manifest records it (``asdict(RunConfig)``, JSON-like).
        index: The index's manifest, when the run searches (its embedder and sources are compared).

    Returns:
        The departures, model and hardware first, then the method's knobs, then the item set.
    """
    out: list[str] = []
    agent = config.get("agent") or {}
    mode = str(agent.get("mode", ""))
    llm = config.get("llm") or {}
    if llm.get("name") != PAPER_LLM:
        out.append(f"llm: {llm.get('name')} (the paper: Qwen2.5-72B-Instruct on vLLM)")
    elif int(llm.get("tensor_parallel_size") or 1) != PAPER_TP:
        out.append(
            f"llm.tensor_parallel_size: {llm.get('tensor_parallel_size')} (the paper: 4 x L40S, TP = 4)"
        )
    if mode in TOOL_MODES and str(_value(llm.get("tool_calls"))) == "json_schema":
        out.append(
            "llm.tool_calls: json_schema (each agent turn decoded under a schema; the paper: native calls)"
        )
    if mode == "gated":
        out.append("agent.mode: gated (beyond the paper: the standalone answer stands above the gate's "
                   "threshold, and only the rest reach the agent)")  # fmt: skip
    searching = mode in TOOL_MODES or mode == "no_tools"
    for key, (want, words) in PAPER_METHOD.items():
        if not searching and key.startswith(SEARCH_KEYS):
            continue
        if mode not in TOOL_MODES and key.startswith("agent.loop."):
            continue
        got = _value(_get(config, key))
        # The gated agent's tools part is a mode of its own (agent.gate.tools_mode), with that mode's memory.
        memory_mode = str(_get(config, "agent.gate.tools_mode")) if mode == "gated" else mode
        if key == "agent.loop.memory":
            if memory_mode != "full":
                continue  # the ablations change the memory on purpose
            if got is None:
                got = "cache_prune"  # the mode's default (medagent.agent.tools.MODE_DEFAULTS)
        if got != want and not (isinstance(want, float) and isinstance(got, (int, float)) and got == want):
            out.append(f"{key}: {got!r} (the paper: {words})")
    if searching and index is not None:
        embedder = _get(index, "embedder.model") or _get(index, "embedder.name")
        if embedder is not None and embedder not in PAPER_EMBEDDERS:
            out.append(f"index embedder: {embedder} (the paper: SPECTER, L2)")
        sources = index.get("sources")
        if isinstance(sources, Mapping):
            sources = list(sources)
        if isinstance(sources, list) and len(sources) < 6:
            out.append(
                f"index sources: {', '.join(map(str, sources))} (the paper: six sources, NEJM included)"
            )
    loader = str(_get(config, "benchmark.loader") or "")
    if loader not in PAPER_LOADERS:
        out.append(f"benchmark.loader: {loader} (not one of the paper's item sets; recipe=paper reads them)")
    if int(config.get("limit") or 0):
        out.append(f"limit: {config.get('limit')} (the paper: every item)")
    return out
