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
  - Triage -> Hypothesis Formation when C >= ``triage_to_hypothesis`` or no ``triage_slots`` slot is left;
  - Hypothesis Formation -> Deep Dive when the differential is non-empty and (C >= ``hypothesis_to_deep_dive``
    or entropy <= ``entropy_deep_dive``), or no slot of ``hypothesis_categories`` is left to ask;
  - Deep Dive -> Confirmation when C >= ``deep_dive_to_confirmation`` once the first pass is done (every
    category asked: C reaches 0.7 before the last categories of any order, and Confirmation would end the
    interview without them), or entropy <= ``entropy_confirmation`` with C >= ``hypothesis_to_deep_dive``
    (a sharp differential may confirm early), or no slot is left to ask.
* **Phases do not choose the slot.** ``eligible_slots`` lists every missing slot in priority order, in every
  phase; ``triage_slots`` and ``hypothesis_categories`` only say when Triage and Hypothesis Formation have
  nothing of their own left (``phase_slots_left``). Gating the candidates by phase made the phase, not the
  configured order, decide the first 14 questions (``paper`` and ``physician`` asked the same ones).
* **Passes** (``slots_per_pass = k``): the j-th slot of a category (slot order) belongs to pass ``j // k``;
  slots are ordered by pass, then category rank, then slot order. With k = 4 the first pass is the 4 core
  symptom slots plus every other slot (16 slots), so every category, social history included, is reached
  within the paper's 16 turns (Jabbar et al.) even when each answer fills a single slot.
* **Completion** (``finish_reason``): C >= ``completion_threshold``; Confirmation done (``confirmation_turns``
  questions asked there); the turn budget ``max_turns`` spent; or the router chose retrieval with
  C >= ``route_min_completeness``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from medagent.config import HistoryAgentConfig
from medagent.history.agent.state import SLOT_BY_NAME, SLOTS, Hypothesis, InterviewState, Phase, slots_of
from medagent.history.agent.value import InformationModel, SlotValue
from medagent.interview.order import load_priorities
from medagent.interview.types import INQUIRY_CATEGORIES


@dataclass(frozen=True)
class Rules:
    """What the policy and the phase machine read from the config, resolved once.

    Attributes:
        order: Category priority order (rank 1 first).
        weights: Completeness weight per category (sum 1).
        cfg: The agent config (thresholds).
        information: The training table's model (``policy=information`` only).
    """

    order: tuple[str, ...]
    weights: Mapping[str, float]
    cfg: HistoryAgentConfig
    information: InformationModel | None = None

    @classmethod
    def from_config(cls, cfg: HistoryAgentConfig) -> Rules:
        """Reads the priority order and weights from ``priorities.yaml`` and checks the slot names.

        Raises:
            ValueError: Unknown ``priorities`` choice, slot name or category in the config.
        """
        if cfg.questioning.slots_per_pass is not None and cfg.questioning.slots_per_pass < 1:
            raise ValueError(
                f"agent.questioning.slots_per_pass must be >= 1 or null, got {cfg.questioning.slots_per_pass}"
            )
        pr = load_priorities(cfg.questioning.priorities_file)
        order = pr.priority_order if cfg.questioning.priorities == "paper" else pr.empirical_order
        bad = [s for s in cfg.phases.triage_slots if s not in SLOT_BY_NAME]
        bad += [c for c in cfg.phases.hypothesis_categories if c not in INQUIRY_CATEGORIES]
        if bad:
            raise ValueError(f"unknown slot or category names in the agent config: {bad}")
        info = None
        if cfg.questioning.policy == "information":
            from medagent.history.agent.information import load_table  # only this policy reads the table

            info = InformationModel(load_table(cfg.questioning.information_file))
        return cls(order=tuple(order), weights=dict(pr.completeness_weights), cfg=cfg, information=info)


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


def _missing(state: InterviewState, rules: Rules) -> list[str]:
    return [
        s.name
        for s in SLOTS
        if s.name not in state.slots and state.asks_of(s.name) < rules.cfg.redundancy.max_asks_per_slot
    ]


def slot_pass(name: str, per_pass: int | None) -> int:
    """The pass a slot belongs to: its index within its category // ``per_pass`` (0 without passes)."""
    return 0 if per_pass is None else slots_of(SLOT_BY_NAME[name].category).index(name) // per_pass


def eligible_slots(state: InterviewState, rules: Rules) -> list[str]:
    """Missing slots in priority order: pass, then category rank, then slot order (module docstring).

    A slot is missing when it has no value and has been asked fewer than ``max_asks_per_slot`` times.
    """
    rank = {c: i for i, c in enumerate(rules.order)}
    per_pass = rules.cfg.questioning.slots_per_pass
    index = {s.name: i for i, s in enumerate(SLOTS)}
    return sorted(
        _missing(state, rules),
        key=lambda n: (slot_pass(n, per_pass), rank.get(SLOT_BY_NAME[n].category, len(rank)), index[n]),
    )


def slot_values(state: InterviewState, rules: Rules, names: list[str]) -> dict[str, SlotValue]:
    """``V(s)`` of ``medagent.history.agent.value`` for ``names`` (needs ``questioning.policy=information``)."""
    if rules.information is None:
        raise ValueError("slot values need agent.questioning.policy=information (its training table)")
    cfg = rules.cfg
    return rules.information.slot_values(
        state,
        names,
        rules.weights,
        w_gain=cfg.questioning.information_weight_gain,
        w_iv=cfg.questioning.information_weight_iv,
        w_h=cfg.questioning.information_weight_entropy,
        prior_mix=cfg.questioning.information_prior_mix,
    )


def ranked_slots(state: InterviewState, rules: Rules) -> list[str]:
    """The policy's targets, best first: ``eligible_slots`` (order), or by pass then ``V(s)`` (information).

    Sorting is stable, so equal values keep the priority order.
    """
    names = eligible_slots(state, rules)
    if rules.cfg.questioning.policy != "information" or not names:
        return names
    values = slot_values(state, rules, names)
    per_pass = rules.cfg.questioning.slots_per_pass
    return sorted(names, key=lambda n: (slot_pass(n, per_pass), -values[n].value))


def first_pass_done(state: InterviewState, rules: Rules) -> bool:
    """No slot of pass 0 is missing: every category has been asked (or answered unasked)."""
    return not any(slot_pass(n, rules.cfg.questioning.slots_per_pass) == 0 for n in _missing(state, rules))


def phase_slots_left(state: InterviewState, rules: Rules) -> bool:
    """Whether the current phase still has slots of its own to ask (what ends Triage / Hypothesis early)."""
    names = _missing(state, rules)
    if state.phase is Phase.TRIAGE:
        return any(n in rules.cfg.phases.triage_slots for n in names)
    if state.phase is Phase.HYPOTHESIS_FORMATION:
        return any(SLOT_BY_NAME[n].category in rules.cfg.phases.hypothesis_categories for n in names)
    return bool(names)


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
        if c >= cfg.phases.triage_to_hypothesis:
            return Phase.HYPOTHESIS_FORMATION, f"C={c:.2f} >= {cfg.phases.triage_to_hypothesis}"
        if not phase_slots_left(state, rules):
            return Phase.HYPOTHESIS_FORMATION, "no triage slot left"
        return None
    if state.phase is Phase.HYPOTHESIS_FORMATION:
        if state.differential and c >= cfg.phases.hypothesis_to_deep_dive:
            return Phase.DEEP_DIVE, f"C={c:.2f} >= {cfg.phases.hypothesis_to_deep_dive}"
        if state.differential and h <= cfg.phases.entropy_deep_dive:
            return Phase.DEEP_DIVE, f"entropy={h:.2f} <= {cfg.phases.entropy_deep_dive}"
        if not phase_slots_left(state, rules):
            return Phase.DEEP_DIVE, "no hypothesis-formation slot left"
        return None
    if c >= cfg.phases.deep_dive_to_confirmation and first_pass_done(state, rules):
        return Phase.CONFIRMATION, f"C={c:.2f} >= {cfg.phases.deep_dive_to_confirmation}"
    if (
        state.differential
        and h <= cfg.phases.entropy_confirmation
        and c >= cfg.phases.hypothesis_to_deep_dive
    ):
        return Phase.CONFIRMATION, f"entropy={h:.2f} <= {cfg.phases.entropy_confirmation}"
    if not phase_slots_left(state, rules):
        return Phase.CONFIRMATION, "no slot left"
    return None


def finish_reason(state: InterviewState, rules: Rules) -> str | None:
    """Why the interview should end now (checked before each question), or None to go on."""
    cfg = rules.cfg
    c = completeness(state, rules.weights)
    if state.turn >= cfg.max_turns:
        return f"turn budget ({cfg.max_turns}) spent"
    if c >= cfg.phases.completion_threshold:
        return f"complete (C={c:.2f} >= {cfg.phases.completion_threshold})"
    if state.phase is Phase.CONFIRMATION and state.confirmation_asked >= cfg.phases.confirmation_turns:
        return "confirmation done"
    if state.route == "retrieve" and state.turn > 0 and c >= cfg.phases.route_min_completeness:
        return f"router chose retrieval (C={c:.2f})"
    return None
