"""Reading configs recorded before the agents' settings were grouped (``agent.top_r`` ->
``agent.retrieval.top_r``, ``agent.policy`` -> ``agent.questioning.policy``): run manifests store the config
as JSON, and a resume check or a report compares them by dotted key, so an older run dir's flat keys are
moved to where the schema keeps them now."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any


def _grouped(section: Mapping[str, Any], moves: Mapping[str, str]) -> dict[str, Any]:
    """``section`` with each key of ``moves`` put at its dotted path (other keys stay where they are)."""
    nested: dict[str, Any] = {}
    for key, value in section.items():
        node = nested
        *parents, leaf = moves.get(str(key), str(key)).split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return nested


def _with_config(
    manifest: Mapping[str, Any] | None, upgrade: Callable[[Mapping[str, Any]], dict[str, Any]]
) -> dict[str, Any] | None:
    """A run manifest with its ``config`` upgraded by ``upgrade``; None stays None."""
    if manifest is None:
        return None
    out = dict(manifest)
    if isinstance(out.get("config"), Mapping):
        out["config"] = upgrade(out["config"])
    return out


# Former ``agent.<key>`` -> its path under ``agent`` now (``AgentConfig``'s groups).
AGENT_MOVES: dict[str, str] = {
    **{k: f"sampling.{k}" for k in ("temperature", "top_p", "max_tokens")},
    **{
        k: f"answer.{k}"
        for k in (
            "constrained_answer",
            "retry_invalid",
            "retry_temperature",
            "retry_top_p",
            "final_answer_call",
        )
    },
    **{
        k: f"loop.{k}"
        for k in (
            "tools",
            "memory",
            "batch_size",
            "max_steps",
            "max_conversation_tokens",
            "step_max_tokens",
            "tool_max_tokens",
            "max_calls_per_step",
            "doc_max_chars",
            "n_options",
        )
    },
    **{k: f"retrieval.{k}" for k in ("top_k", "top_r", "no_tools_docs")},
    "retrieval_sources": "retrieval.sources",
    "retrieval_mode": "retrieval.mode",
}


def upgrade_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` (a run's config as JSON) with a flat ``agent`` section moved into its groups; a config
    recorded with the groups comes back equal. The input is not changed."""
    out = copy.deepcopy(dict(config))
    agent = out.get("agent")
    if isinstance(agent, Mapping) and "constrained_answer" in agent:
        out["agent"] = agent = _grouped(agent, AGENT_MOVES)
    # Not a QA run's config (the history-taking agent has no ``retrieval.top_r``): nothing more to add.
    if not isinstance(agent, Mapping) or "top_r" not in (agent.get("retrieval") or {}):
        return out
    return _with_defaults(out, QA_ADDED_DEFAULTS)


def _with_defaults(config: dict[str, Any], added: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the settings added later (``added``: dotted path -> the value every earlier run
    had) filled in where it lacks them."""
    for path, value in added.items():
        *parents, leaf = path.split(".")
        node = config
        for p in parents:
            node = node.setdefault(p, {})
        node.setdefault(leaf, value)
    return config


# A QA run's settings that older manifests lack, and the value those runs ran with.
QA_ADDED_DEFAULTS: dict[str, Any] = {
    "recipe.name": "default",
    "recipe.item_suffix": "",
    "recipe.memory": "cache_prune",
    "agent.loop.feedback": "qa_tools",
    # Tool replies were unbounded and a conversation took any free slot.
    "agent.cap_outputs": False,
    "llm.slot_affinity": False,
    "agent.retrieval.hold_out_own_evidence": False,
    "llm.speculative": "none",
    "agent.loop.thought_chars": 300,
}


def upgrade_manifest(manifest: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A run manifest with its ``config`` upgraded (``upgrade_config``); None stays None."""
    return _with_config(manifest, upgrade_config)


# --- The history-taking agent (``HistoryAgentConfig``'s groups) ---------------------------------------------

# Former ``agent.<key>`` of an interview run -> its path under ``agent`` now.
HISTORY_AGENT_MOVES: dict[str, str] = {
    **{
        k: f"questioning.{k}"
        for k in (
            "policy",
            "priorities",
            "priorities_file",
            "slots_per_pass",
            "information_file",
            "information_weight_gain",
            "information_weight_iv",
            "information_weight_entropy",
            "information_prior_mix",
        )
    },
    **{
        k: f"phases.{k}"
        for k in (
            "completion_threshold",
            "triage_to_hypothesis",
            "hypothesis_to_deep_dive",
            "deep_dive_to_confirmation",
            "entropy_deep_dive",
            "entropy_confirmation",
            "confirmation_turns",
            "triage_slots",
            "hypothesis_categories",
            "route_min_completeness",
        )
    },
    **{k: f"redundancy.{k}" for k in ("max_asks_per_slot", "similarity_threshold", "max_replacements")},
    **{
        k: f"generation.{k}"
        for k in (
            "temperature",
            "top_p",
            "max_tokens_update",
            "max_tokens_question",
            "max_tokens_summary",
            "max_tokens_assessment",
            "json_schema",
            "max_retries",
            "max_hypotheses",
            "max_facts_per_turn",
        )
    },
    "retrieval": "retrieval.enabled",
    "retrieval_top_k": "retrieval.top_k",
    "retrieval_mode": "retrieval.mode",
    "return_parents": "retrieval.return_parents",
    "retrieval_sources": "retrieval.sources",
    "max_passage_chars": "retrieval.max_passage_chars",
    **{k: f"single_shot.{k}" for k in ("context", "transcript_run", "max_transcript_chars")},
}


def upgrade_history_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` (an interview run's config as JSON) with a flat history-agent section moved into its
    groups and the settings added since filled in (``HISTORY_ADDED_DEFAULTS``); a current config comes back
    equal. The input is not changed."""
    out = copy.deepcopy(dict(config))
    if isinstance(out.get("eval"), Mapping):
        _with_defaults(out, HISTORY_ADDED_DEFAULTS)
    agent = out.get("agent")
    if not isinstance(agent, Mapping) or not any(
        k in HISTORY_AGENT_MOVES and not isinstance(v, Mapping) for k, v in agent.items()
    ):
        # Grouped already (a group is a mapping; the former ``retrieval`` was a bool), or no agent section.
        return out
    out["agent"] = _grouped(agent, HISTORY_AGENT_MOVES)
    return out


# An interview run's settings that older manifests lack, and the value those runs ran with.
HISTORY_ADDED_DEFAULTS: dict[str, Any] = {
    "eval.replay_keys": "exchange",
    "eval.replay_opening": False,
    "llm.speculative": "none",
}


def upgrade_history_manifest(manifest: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An interview run's manifest with its ``config`` upgraded (``upgrade_history_config``); None stays
    None."""
    return _with_config(manifest, upgrade_history_config)
