"""Completeness C, differential entropy, and the phase machine Triage -> Hypothesis -> Deep Dive -> Confirmation.

Definitions (the paper names the quantities, not their formulas; these are ours):

* **Completeness** ``C = sum_c w_c * filled_c / n_c`` over the 11 MediTOD categories, where ``w_c`` are the
  completeness weights of ``conf/interview/priorities.yaml`` (they sum to 1), ``n_c`` is the number of slots
  of category ``c`` (``state.SLOTS``) and ``filled_c`` how many of them hold a value. So C is in [0, 1].
* **Entropy** of the differential: Shannon entropy of its probabilities divided by ``log(k)`` for ``k >= 2``
  hypotheses, so 0 = one certain diagnosis and 1 = all equally likely; a differential of one hypothesis has
  entropy 0 and an empty one entropy 1 (nothing is known).
* **Transitions** (thresholds in ``HistoryAgentConfig``), checked after every answer, at most one step per
  answer except for a red flag:
  - any phase -> Confirmation as soon as a red flag is present;
  - Triage -> Hypothesis Formation when C >= ``triage_to_hypothesis`` or no triage slot is left to ask;
  - Hypothesis Formation -> Deep Dive when the differential is non-empty and (C >= ``hypothesis_to_deep_dive``
    or entropy <= ``entropy_deep_dive``), or no slot of the phase is left to ask;
  - Deep Dive -> Confirmation when C >= ``deep_dive_to_confirmation``, or entropy <= ``entropy_confirmation``
    with C >= ``hypothesis_to_deep_dive``, or no slot is left to ask.
* **Completion** (``finish_reason``): C >= ``completion_threshold``; Confirmation done (``confirmation_turns``
  questions asked there); the turn budget ``max_turns`` spent; or the router chose retrieval with
  C >= ``route_min_completeness``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from medagent.config import HistoryAgentConfig
from medagent.history.state import SLOT_BY_NAME, SLOTS, Hypothesis, InterviewState, Phase, slots_of
from medagent.interview.types import INQUIRY_CATEGORIES
from medagent.network.validation import load_priorities

PRIORITY_CHOICES = ("paper", "physician")


@dataclass(frozen=True)
class Rules:
    """What the policy and the phase machine read from the config, resolved once.

    Attributes:
        order: Category priority order (rank 1 first).
        weights: Completeness weight per category (sum 1).
        cfg: The agent config (thresholds).
    """

    order: tuple[str, ...]
    weights: Mapping[str, float]
    cfg: HistoryAgentConfig

    @classmethod
    def from_config(cls, cfg: HistoryAgentConfig) -> Rules:
        """Reads the priority order and weights from ``priorities.yaml`` and checks the slot names.

        Raises:
            ValueError: Unknown ``priorities`` choice, slot name or category in the config.
        """
        if cfg.priorities not in PRIORITY_CHOICES:
            raise ValueError(f"agent.priorities must be one of {PRIORITY_CHOICES}, got {cfg.priorities!r}")
        pr = load_priorities(cfg.priorities_file)
        order = pr.priority_order if cfg.priorities == "paper" else pr.empirical_order
        bad = [s for s in cfg.triage_slots if s not in SLOT_BY_NAME]
        bad += [c for c in cfg.hypothesis_categories if c not in INQUIRY_CATEGORIES]
        if bad:
            raise ValueError(f"unknown slot or category names in the agent config: {bad}")
        return cls(order=tuple(order), weights=dict(pr.completeness_weights), cfg=cfg)


def completeness(state: InterviewState, weights: Mapping[str, float]) -> float:
    """C = sum over categories of weight x share of the category's slots filled."""
    total = 0.0
    for category, w in weights.items():
        names = slots_of(category)
        if names:
            total += w * sum(n in state.slots for n in names) / len(names)
    return total


def category_coverage(state: InterviewState) -> dict[str, float]:
    """Share of each category's slots filled."""
    out: dict[str, float] = {}
    for category in INQUIRY_CATEGORIES:
        names = slots_of(category)
        out[category] = sum(n in state.slots for n in names) / len(names) if names else 0.0
    return out


def entropy(differential: tuple[Hypothesis, ...]) -> float:
    """Normalised Shannon entropy of the differential's probabilities (conventions in the module docstring)."""
    if not differential:
        return 1.0
    ps = [h.probability for h in differential if h.probability > 0]
    if len(differential) < 2 or len(ps) < 2:
        return 0.0
    z = sum(ps)
    h = -sum((p / z) * math.log(p / z) for p in ps)
    return h / math.log(len(differential))


def eligible_slots(state: InterviewState, rules: Rules, phase: Phase | None = None) -> list[str]:
    """Missing slots the policy may still ask in ``phase`` (default: the state's), in priority order.

    A slot is missing when it has no value and has been asked fewer than ``max_asks_per_slot`` times.
    Triage allows ``triage_slots``; Hypothesis Formation the ``hypothesis_categories``; Deep Dive and
    Confirmation every slot.
    """
    phase = phase or state.phase
    rank = {c: i for i, c in enumerate(rules.order)}
    names = [
        s.name
        for s in sorted(SLOTS, key=lambda s: rank.get(s.category, len(rank)))  # stable: slot order kept
        if s.name not in state.slots and state.asks_of(s.name) < rules.cfg.max_asks_per_slot
    ]
    if phase is Phase.TRIAGE:
        return [n for n in names if n in rules.cfg.triage_slots]
    if phase is Phase.HYPOTHESIS_FORMATION:
        return [n for n in names if SLOT_BY_NAME[n].category in rules.cfg.hypothesis_categories]
    return names


def next_phase(state: InterviewState, rules: Rules) -> tuple[Phase, str] | None:
    """The phase to move to after an answer, with the reason, or None to stay."""
    cfg = rules.cfg
    if state.phase is Phase.CONFIRMATION:
        return None
    if state.red_flags:
        return Phase.CONFIRMATION, f"red flag: {', '.join(state.red_flags)}"
    c = completeness(state, rules.weights)
    h = entropy(state.differential)
    if state.phase is Phase.TRIAGE:
        if c >= cfg.triage_to_hypothesis:
            return Phase.HYPOTHESIS_FORMATION, f"C={c:.2f} >= {cfg.triage_to_hypothesis}"
        if not eligible_slots(state, rules):
            return Phase.HYPOTHESIS_FORMATION, "no triage slot left"
        return None
    if state.phase is Phase.HYPOTHESIS_FORMATION:
        if state.differential and c >= cfg.hypothesis_to_deep_dive:
            return Phase.DEEP_DIVE, f"C={c:.2f} >= {cfg.hypothesis_to_deep_dive}"
        if state.differential and h <= cfg.entropy_deep_dive:
            return Phase.DEEP_DIVE, f"entropy={h:.2f} <= {cfg.entropy_deep_dive}"
        if not eligible_slots(state, rules):
            return Phase.DEEP_DIVE, "no hypothesis-formation slot left"
        return None
    if c >= cfg.deep_dive_to_confirmation:
        return Phase.CONFIRMATION, f"C={c:.2f} >= {cfg.deep_dive_to_confirmation}"
    if state.differential and h <= cfg.entropy_confirmation and c >= cfg.hypothesis_to_deep_dive:
        return Phase.CONFIRMATION, f"entropy={h:.2f} <= {cfg.entropy_confirmation}"
    if not eligible_slots(state, rules):
        return Phase.CONFIRMATION, "no slot left"
    return None


def finish_reason(state: InterviewState, rules: Rules) -> str | None:
    """Why the interview should end now (checked before each question), or None to go on."""
    cfg = rules.cfg
    c = completeness(state, rules.weights)
    if state.turn >= cfg.max_turns:
        return f"turn budget ({cfg.max_turns}) spent"
    if c >= cfg.completion_threshold:
        return f"complete (C={c:.2f} >= {cfg.completion_threshold})"
    if state.phase is Phase.CONFIRMATION and state.confirmation_asked >= cfg.confirmation_turns:
        return "confirmation done"
    if state.route == "retrieve" and state.turn > 0 and c >= cfg.route_min_completeness:
        return f"router chose retrieval (C={c:.2f})"
    return None
