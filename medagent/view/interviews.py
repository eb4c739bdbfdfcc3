"""Interview runs (``pipelines.run_interviews``) for the viewer: the list of interviews of a run, and one
interview turn by turn with the agent's state after each turn, its assessment beside the physician's
reference, and the scores its row recorded."""

from __future__ import annotations

from typing import Any

from medagent.history.evaluation.row import InterviewRow
from medagent.view.runs import ViewRun


def listing(vr: ViewRun) -> list[dict[str, Any]]:
    """One line per interview: id, source, outcome and its headline scores."""
    out = []
    for row in vr.rows:
        rec = row.record or {}
        out.append(
            {
                "id": row.interview_id,
                "source": row.source,
                "outcome": row.outcome(),
                "scored": row.scored,
                "rouge_l": rec.get("rouge_l"),
                "red_flag_recall": rec.get("red_flag_recall"),
                "differential_hit": rec.get("differential_hit"),
            }
        )
    return out


def _state_view(state: dict[str, Any]) -> dict[str, Any]:
    """What a reader follows: slots (with the patient's words they rest on), differential, phase, red flags."""
    slots = state.get("slots") or {}
    return {
        "phase": state.get("phase"),
        "slots": [
            {
                "slot": name,
                "value": (v or {}).get("value", ""),
                "quote": (v or {}).get("quote", ""),
                "turn": (v or {}).get("turn"),
            }
            for name, v in slots.items()
        ],
        "differential": [
            {
                "diagnosis": h.get("diagnosis"),
                "probability": h.get("probability"),
                "reason": h.get("reason", ""),
            }
            for h in state.get("differential") or []
        ],
        "red_flags": list(state.get("red_flags") or []),
        "summary": state.get("summary", ""),
    }


def _refusal(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("turn", "kind", "name", "value", "quote", "reason")
    return {k: r.get(k, "") for k in keys}


def detail(vr: ViewRun, interview_id: str) -> dict[str, Any] | None:
    """One interview in full, or None when the run has no such interview."""
    row: InterviewRow | None = next((r for r in vr.rows if r.interview_id == interview_id), None)
    if row is None:
        return None
    result = row.result or {}
    states = result.get("states") or []
    turns = []
    for i, t in enumerate(result.get("turns") or []):
        # states[0] is the state before the first question; states[i + 1] the state after turn i.
        after = states[i + 1] if i + 1 < len(states) else None
        turns.append(
            {
                "turn": t.get("turn"),
                "phase": t.get("phase"),
                "slot": t.get("slot"),
                "question": t.get("question", ""),
                "answer": t.get("answer", ""),
                "reason": t.get("reason", ""),
                "completeness": t.get("completeness"),
                "entropy": t.get("entropy"),
                "state": _state_view(after) if after else None,
            }
        )
    final_state = result.get("final_state") or {}
    return {
        "id": row.interview_id,
        "run": vr.index,
        "label": vr.label,
        "source": row.source,
        "mode": row.mode,
        "outcome": row.outcome(),
        "error": row.error,
        "skipped": row.skipped,
        "turns": turns,
        "blocked": final_state.get("blocked") or [],
        # Slot values and red flags the grounding check kept out of the state (no quote, an unsure or negated
        # quote, a quote that does not express the concept), with the turn and the reason.
        "refused": [_refusal(r) for r in final_state.get("refused") or []],
        "final_state": _state_view(final_state) if final_state else None,
        "assessment": result.get("assessment"),
        "reference": row.reference,
        "record": row.record,
        # Keys this version does not know (fact-level scores from newer evaluators among them), as recorded.
        "extra": row.extra,
        "simulator": row.simulator or [],
        "usage": result.get("usage"),
        "elapsed_s": row.elapsed_s,
    }
