"""Pre-processing of each answer: summary, slot extraction, differential, red flags and routing.

The paper's pre-processing steps (summarise, extract slots, update the differential, route) are one
JSON-schema-constrained request per turn here, to keep a CPU turn at one update call plus one question
call. Each field of the reply is validated on its own: a field of the wrong shape is recorded in
``Updated.errors`` and left out (the state keeps its previous value), the rest is used. A reply with no
JSON object at all is retried (``llmio.ask_json``) and, failing that, the turn changes nothing but the
recorded error.

Red flags need evidence, as on the reference side: each flag comes with the patient's own words, and a
flag is kept only when that quote is in the patient's answers so far and no negation or uncertainty scope
covers it (``reference.quote_supports``, the same function the reference extractor uses). A flag without
a quote, or with one the patient did not say or denied ("no blood when I cough"), is dropped and recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from medagent.config import HistoryAgentConfig
from medagent.history.agent.state import (
    SLOT_BY_NAME,
    SLOTS,
    InterviewState,
    Updated,
    is_informative,
    normalise_differential,
)
from medagent.history.llmio import (
    CallLog,
    MalformedReply,
    array,
    ask_json,
    json_format,
    obj_schema,
    require_str,
    string,
)
from medagent.history.simulation.reference import quote_supports
from medagent.llm.base import ChatModel
from medagent.prompts import load_prompt

ROUTES = ("question", "retrieve")


def update_schema(cfg: HistoryAgentConfig) -> dict[str, Any]:
    """The ``response_format`` of the per-turn update."""
    fact = obj_schema({"slot": {"type": "string", "enum": [s.name for s in SLOTS]}, "value": string(160)})
    hypothesis = obj_schema(
        {"diagnosis": string(80), "probability": {"type": "number"}, "reason": string(160)}
    )
    schema = obj_schema(
        {
            "summary": string(800),
            "facts": array(fact, cfg.max_facts_per_turn),
            "differential": array(hypothesis, cfg.max_hypotheses),
            "red_flags": array(
                obj_schema({"id": {"type": "string", "enum": list(cfg.red_flags)}, "quote": string(200)}),
                len(cfg.red_flags),
            ),
            "route": {"type": "string", "enum": list(ROUTES)},
        }
    )
    return json_format("history_update", schema)


def parse_update(obj: dict[str, Any], cfg: HistoryAgentConfig, patient_lines: Sequence[str] = ()) -> Updated:
    """Validates each field of an update reply; bad fields become errors (module docstring).

    ``patient_lines`` are the patient's answers so far: a red flag's quote must be affirmed in one of them.

    Raises:
        MalformedReply: No field at all is usable (the reply is retried).
    """
    errors: list[str] = []
    if not any(k in obj for k in ("summary", "facts", "differential", "red_flags", "route")):
        raise MalformedReply(f"none of the expected keys in the reply (got {sorted(obj)[:6]})")
    summary = obj.get("summary")
    if summary is not None and not isinstance(summary, str):
        errors.append("update: summary is not a string; kept the previous one")
        summary = None
    facts: list[tuple[str, str]] = []
    raw_facts = obj.get("facts", [])
    if not isinstance(raw_facts, list):
        errors.append("update: facts is not a list; no slot filled this turn")
        raw_facts = []
    for f in raw_facts:
        if not (isinstance(f, dict) and isinstance(f.get("slot"), str) and isinstance(f.get("value"), str)):
            errors.append(f"update: fact {str(f)[:80]!r} is not {{slot, value}}; dropped")
        elif f["slot"] not in SLOT_BY_NAME:
            errors.append(f"update: unknown slot {f['slot']!r}; dropped")
        elif is_informative(f["value"]):
            facts.append((f["slot"], " ".join(f["value"].split())))
    differential = None
    raw_diff = obj.get("differential")
    if raw_diff is not None:
        items: list[tuple[str, float, str]] = []
        ok = isinstance(raw_diff, list)
        for h in raw_diff if ok else []:
            p = h.get("probability") if isinstance(h, dict) else None
            if isinstance(h, dict) and isinstance(h.get("diagnosis"), str) and isinstance(p, int | float):
                items.append((h["diagnosis"], float(p), str(h.get("reason") or "")))
            else:
                ok = False
        if ok:
            differential = normalise_differential(items, cfg.max_hypotheses)
        else:
            errors.append(
                "update: differential is not a list of {diagnosis, probability}; kept the previous one"
            )
    flags: list[str] = []
    raw_flags = obj.get("red_flags", [])
    for f in raw_flags if isinstance(raw_flags, list) else []:
        fid = f.get("id") if isinstance(f, dict) else f
        quote = str(f.get("quote") or "") if isinstance(f, dict) else ""
        if not isinstance(fid, str) or fid not in cfg.red_flags:
            errors.append(f"update: unknown red flag {str(fid)[:60]!r}; dropped")
        elif not quote_supports(quote, patient_lines):
            errors.append(
                f"update: red flag {fid} dropped, {quote[:80]!r} is not the patient's affirmed words"
            )
        else:
            flags.append(fid)
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
    )


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


async def preprocess(llm: ChatModel, state: InterviewState, cfg: HistoryAgentConfig, log: CallLog) -> Updated:
    """The update event for the state's last answered question (module docstring)."""
    last = state.asked[-1] if state.asked else None
    messages = load_prompt("history_update").render(
        summary=state.summary,
        slots=slot_table(state),
        differential=render_differential(state),
        red_flag_definitions=cfg.red_flags,
        question=last.text if last else "",
        answer=(last.answer or "") if last else "",
        max_hypotheses=cfg.max_hypotheses,
    )
    patient_lines = [q.answer for q in state.asked if q.answer]
    update, errors = await ask_json(
        llm,
        messages,
        lambda obj: parse_update(obj, cfg, patient_lines),
        prompt="history_update",
        tag=f"turn {state.turn} update",
        log=log,
        response_format=update_schema(cfg) if cfg.json_schema else None,
        max_tokens=cfg.max_tokens_update,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        max_retries=cfg.max_retries,
    )
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
    )


def summary_parser(obj: dict[str, Any]) -> str:
    text = require_str(obj, "summary").strip()
    if not text:
        raise MalformedReply("'summary' is empty")
    return text
