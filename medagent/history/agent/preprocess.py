"""Pre-processing of each answer: summary, slot extraction, differential, red flags and routing.

The paper's pre-processing steps (summarise, extract slots, update the differential, route) are one
JSON-schema-constrained request per turn here, to keep a CPU turn at one update call plus one question
call. The reply is a *change* to the state, not the state again: ``summary_add`` (what this answer adds to
the running summary, appended to it), ``slot_updates`` (new or corrected slots, each with the patient's
words), ``differential`` (the new differential, or ``[]`` when it is unchanged), ``red_flags`` (each with
the patient's words) and ``route``. Every output of the paper's step is still there; only the rewrite of
the whole summary and of an unchanged differential is gone, which is most of what a turn decoded.

Each field of the reply is validated on its own: a field of the wrong shape is recorded in
``Updated.errors`` and left out (the state keeps its previous value), the rest is used. A reply with no
JSON object at all is retried (``medagent.llm.structured.ask_with``) and, failing that, the turn changes
nothing but the recorded error.

Grounding (``medagent.history.agent.grounding``): a slot value or red flag is kept only when its quote is
the patient's sure words and expresses the slot's or flag's concept; everything else is recorded as a
``Refusal`` in the update (and so in the state and the trace).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Annotated, Any, TypeVar

from pydantic import BeforeValidator, Strict, ValidationError, create_model, field_validator

from medagent.config import HistoryAgentConfig
from medagent.history.agent.grounding import Grounding
from medagent.history.agent.state import (
    SLOT_BY_NAME,
    SLOTS,
    InterviewState,
    Refusal,
    Updated,
    is_informative,
    normalise_differential,
)
from medagent.history.simulation.reference import FlagQuote, flag_quote_model
from medagent.llm.base import ChatModel
from medagent.llm.structured import (
    MalformedReply,
    Output,
    ask_with,
    capped_list,
    capped_str,
    enum_str,
    json_object,
    response_format,
)
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt

ROUTES = ("question", "retrieve")
ItemT = TypeVar("ItemT", bound=Output)


def _or_empty(value: Any) -> str:
    return str(value or "")


class Fact(Output):
    """One slot change: the value and the patient's words it rests on."""

    slot: enum_str([s.name for s in SLOTS])  # type: ignore[valid-type]
    value: capped_str(80)  # type: ignore[valid-type]
    quote: Annotated[capped_str(160), BeforeValidator(_or_empty)] = ""  # type: ignore[valid-type]


class Hypothesis(Output):
    """One entry of the differential. A probability must be a JSON number, not a numeral in a string."""

    diagnosis: capped_str(80)  # type: ignore[valid-type]
    probability: Annotated[float, Strict()]
    reason: Annotated[capped_str(80), BeforeValidator(_or_empty)] = ""  # type: ignore[valid-type]


UPDATE_KEYS = ("summary_add", "slot_updates", "differential", "red_flags", "route")


@lru_cache(maxsize=32)
def update_model(red_flags: tuple[str, ...], max_facts: int, max_hypotheses: int) -> type[Output]:
    """The per-turn update's output model: the schema the model is constrained by. ``parse_update`` reads a
    reply field by field with the item models, so one bad field does not cost the others."""
    fields: dict[str, Any] = {
        "summary_add": (capped_str(300), ...),
        "slot_updates": (capped_list(Fact, max_facts), ...),
        "differential": (capped_list(Hypothesis, max_hypotheses), ...),
        "red_flags": (capped_list(flag_quote_model(red_flags), len(red_flags)), ...),
        "route": (enum_str(ROUTES), ...),
    }
    return create_model("HistoryUpdate", __base__=Output, **fields)


def update_schema(cfg: HistoryAgentConfig) -> dict[str, Any]:
    """The ``response_format`` of the per-turn update."""
    model = update_model(
        tuple(cfg.red_flags), cfg.generation.max_facts_per_turn, cfg.generation.max_hypotheses
    )
    return response_format("history_update", model)


def parse_update(
    obj: dict[str, Any],
    cfg: HistoryAgentConfig,
    patient_lines: Sequence[str] = (),
    grounding: Grounding | None = None,
    previous_summary: str = "",
) -> Updated:
    """Validates each field of an update reply and grounds its slots and flags (module docstring).

    ``patient_lines`` are the patient's answers so far: every quote must be in one of them.

    Raises:
        MalformedReply: No field at all is usable (the reply is retried).
        ValueError: No ``grounding`` check was given (our bug: the state would take ungrounded values).
    """
    if grounding is None:
        raise ValueError("parse_update needs the grounding check")
    errors: list[str] = []
    refused: list[Refusal] = []
    if not any(k in obj for k in UPDATE_KEYS):
        raise MalformedReply(f"none of the expected keys in the reply (got {sorted(obj)[:6]})")
    summary = None
    add = obj.get("summary_add")
    if add is not None and not isinstance(add, str):
        errors.append("update: summary_add is not a string; kept the previous summary")
    elif add and add.strip():
        summary = " ".join(f"{previous_summary} {add}".split())
    facts: list[tuple[str, str, str]] = []
    raw_facts = obj.get("slot_updates", [])
    if not isinstance(raw_facts, list):
        errors.append("update: slot_updates is not a list; no slot filled this turn")
        raw_facts = []
    for f in raw_facts:
        fact = _item(Fact, f)
        if fact is None:
            errors.append(f"update: slot update {str(f)[:80]!r} is not {{slot, value, quote}}; dropped")
        elif fact.slot not in SLOT_BY_NAME:
            errors.append(f"update: unknown slot {fact.slot!r}; dropped")
        elif is_informative(fact.value):
            value, quote = " ".join(fact.value.split()), " ".join(fact.quote.split())
            why = grounding.check_slot(fact.slot, quote, patient_lines)
            if why is None:
                facts.append((fact.slot, value, quote))
            else:
                refused.append(Refusal("slot", fact.slot, value, quote, why))
    differential = None
    raw_diff = obj.get("differential")
    if raw_diff:  # [] means unchanged
        hypotheses = [_item(Hypothesis, h) for h in raw_diff] if isinstance(raw_diff, list) else [None]
        if all(h is not None for h in hypotheses):
            items = [(h.diagnosis, h.probability, h.reason) for h in hypotheses if h is not None]
            differential = normalise_differential(items, cfg.generation.max_hypotheses)
        else:
            errors.append(
                "update: differential is not a list of {diagnosis, probability}; kept the previous one"
            )
    flags: list[str] = []
    raw_flags = obj.get("red_flags", [])
    for f in raw_flags if isinstance(raw_flags, list) else []:
        # A bare id (no quote) is read too, and then refused for want of the patient's words.
        flag = _item(FlagQuote, f if isinstance(f, dict) else {"id": f})
        if flag is None or flag.id not in cfg.red_flags:
            fid = f.get("id") if isinstance(f, dict) else f
            errors.append(f"update: unknown red flag {str(fid)[:60]!r}; dropped")
        elif (why := grounding.check_flag(flag.id, flag.quote, patient_lines)) is not None:
            refused.append(Refusal("red_flag", flag.id, flag.id, flag.quote, why))
        else:
            flags.append(flag.id)
    if not isinstance(raw_flags, list):
        errors.append("update: red_flags is not a list; ignored")
    route = obj.get("route")
    if route is not None and route not in ROUTES:
        errors.append(f"update: route {str(route)[:40]!r} is not one of {ROUTES}; ignored")
        route = None
    return Updated(
        summary=summary,
        facts=tuple(facts),
        differential=differential,
        red_flags=tuple(dict.fromkeys(flags)),
        route=route,
        errors=tuple(errors),
        refused=tuple(refused),
    )


def _item(model: type[ItemT], value: Any) -> ItemT | None:
    """One list item of an update reply read as ``model``; None when it does not fit."""
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


def slot_table(state: InterviewState) -> list[dict[str, str]]:
    """Every slot with its category, meaning and value so far ('' when missing), for the prompts."""
    return [
        {
            "name": s.name,
            "category": s.category,
            "description": s.description,
            "value": state.slots[s.name].value if s.name in state.slots else "",
        }
        for s in SLOTS
    ]


def render_differential(state: InterviewState) -> list[dict[str, Any]]:
    return [
        {"diagnosis": h.diagnosis, "probability": round(h.probability, 2), "reason": h.reason}
        for h in state.differential
    ]


async def preprocess(
    llm: ChatModel, state: InterviewState, cfg: HistoryAgentConfig, log: UsageRecord, grounding: Grounding
) -> Updated:
    """The update event for the state's last answered question (module docstring)."""
    last = state.asked[-1] if state.asked else None
    messages = load_prompt("history_update").render(
        summary=state.summary,
        slots=slot_table(state),
        differential=render_differential(state),
        red_flag_definitions=cfg.red_flags,
        question=last.text if last else "",
        answer=(last.answer or "") if last else "",
        max_hypotheses=cfg.generation.max_hypotheses,
    )
    patient_lines = [q.answer for q in state.asked if q.answer]
    reply = await ask_with(
        llm,
        messages,
        lambda text: parse_update(json_object(text), cfg, patient_lines, grounding, state.summary),
        prompt="history_update",
        fmt=update_schema(cfg) if cfg.generation.json_schema else None,
        tag=f"turn {state.turn} update",
        usage=log,
        max_tokens=cfg.generation.max_tokens_update,
        temperature=cfg.generation.temperature,
        top_p=cfg.generation.top_p,
        max_retries=cfg.generation.max_retries,
    )
    update, errors = reply.value, reply.errors
    if update is None:
        return Updated(errors=tuple(errors))
    log.errors.extend(update.errors)
    return Updated(
        summary=update.summary,
        facts=update.facts,
        differential=update.differential,
        red_flags=update.red_flags,
        route=update.route,
        errors=(*errors, *update.errors),
        refused=update.refused,
    )


class SummaryReply(Output):
    """The ``clinical_summary`` reply."""

    summary: capped_str(1500)  # type: ignore[valid-type]

    @field_validator("summary")
    @classmethod
    def _summary(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("'summary' is empty")
        return value.strip()
