"""The confidence gate's sweep (issue 18): every threshold derived from one ``agent=gated`` run.

Each prediction of a gated run carries one ``gate`` trace step (``medagent.agent.gated``): the standalone
answer and its confidence, what the confidence check cost, and, when the tools ran (always, with
``agent.gate.record_both``), the full agent's answer and cost. From those this module rebuilds, per question,
what each arm would have answered and spent:

- ``standalone``: the first answer, at the cost of its one call;
- ``full``: the tools' answer, at the tools' cost (the full agent run alone);
- ``gated`` at threshold t: the first answer when its confidence >= t, else the tools' answer, at the cost
  of the first call + the check + (below t) the tools.

The rebuilt answers are ``Prediction`` objects scored by ``medagent.eval`` like any run (one scoring path),
so accuracy, its 95% CI and the flips are the same numbers a separate run of each arm would give on the
same questions; wall time per question is the sum of the parts' wall times (the parts run in sequence).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from medagent.eval import bootstrap_ci, question_outcomes, score
from medagent.llm.usage import UsageRecord
from medagent.report.table import NA, Table, pct
from medagent.types import INVALID, Gold, Prediction

GATE_STEP = "gate"
COST_KEYS = ("llm_calls", "prompt_tokens", "evaluated_tokens", "completion_tokens", "wall_s")
# Cost figures a backend may not report: absent stays None (not 0) through the arms' sums.
OPTIONAL_COST = ("evaluated_tokens",)
# The gate table's rows: the small CPU model's letter probabilities sit around 0.3-0.45, a large model's
# near 1; the Pareto figure adds every distinct confidence of the run anyway.
DEFAULT_THRESHOLDS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.7, 0.9)


@dataclass(frozen=True)
class GateRecord:
    """One question of a gated run: its two answers, the confidence, and what each part cost."""

    id: str
    benchmark: str
    confidence: float | None
    first_answer: str
    first: dict[str, float | None]
    check: dict[str, float | None]
    tools_answer: str | None
    tools: dict[str, float | None] | None
    error: str | None = None

    def confident(self, threshold: float) -> bool:
        return self.first_answer != INVALID and self.confidence is not None and self.confidence >= threshold


def gate_step(pred: Prediction) -> dict[str, Any] | None:
    return next((s for s in pred.trace if isinstance(s, dict) and s.get("kind") == GATE_STEP), None)


def _cost(d: Any) -> dict[str, float | None]:
    d = d if isinstance(d, dict) else {}
    return {
        k: float(d[k]) if d.get(k) is not None else (None if k in OPTIONAL_COST else 0.0) for k in COST_KEYS
    }


def gate_records(predictions: Iterable[Prediction]) -> list[GateRecord]:
    """The gate record of every prediction that has one, or that errored (an error counts in every arm)."""
    out = []
    for p in predictions:
        step = gate_step(p)
        if step is None:
            if p.error:
                zero = _cost(None)
                out.append(GateRecord(p.id, p.benchmark, None, INVALID, zero, zero, INVALID, zero, p.error))
            continue
        tools = step.get("tools")
        out.append(
            GateRecord(
                id=p.id,
                benchmark=p.benchmark,
                confidence=None if step.get("confidence") is None else float(step["confidence"]),
                first_answer=str(step.get("first_answer", INVALID)),
                first=_cost(step.get("first")),
                check=_cost(step.get("check")),
                tools_answer=None if tools is None else str(step.get("tools_answer", INVALID)),
                tools=None if tools is None else _cost(tools),
                error=p.error,
            )
        )
    return out


def _plus(*costs: dict[str, float | None]) -> dict[str, float | None]:
    def total(k: str) -> float | None:
        known = [v for c in costs if (v := c[k]) is not None]
        return sum(known) if known else None

    return {k: total(k) for k in COST_KEYS}


def arm(records: Sequence[GateRecord], name: str, threshold: float | None = None) -> list[Prediction]:
    """The predictions ``name`` (standalone | full | gated at ``threshold``) would have made, with their cost
    in ``usage`` and ``latency_s``; a question whose needed part was not run (the tools, when the run did
    not record both and the first answer was confident) is left out."""
    out = []
    for r in records:
        if name == "standalone":
            answer, cost = r.first_answer, r.first
        elif name == "full":
            if r.tools is None or r.tools_answer is None:
                continue
            answer, cost = r.tools_answer, r.tools
        elif name == "gated" and threshold is not None:
            if r.confident(threshold):
                answer, cost = r.first_answer, _plus(r.first, r.check)
            elif r.tools is None or r.tools_answer is None:
                continue
            else:
                answer, cost = r.tools_answer, _plus(r.first, r.check, r.tools)
        else:
            raise ValueError(f"unknown arm {name!r} (threshold {threshold})")
        usage = {k: int(v) for k in COST_KEYS if k != "wall_s" and (v := cost[k]) is not None}
        out.append(
            Prediction(
                id=r.id, benchmark=r.benchmark, answer=INVALID if r.error else answer, error=r.error,
                usage=usage, latency_s=cost["wall_s"] or 0.0,
            )
        )  # fmt: skip
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def arm_record(
    name: str,
    threshold: float | None,
    preds: Sequence[Prediction],
    golds: Mapping[str, Gold],
    baseline: Mapping[str, int],
    records: Sequence[GateRecord],
    bootstrap_samples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Accuracy, CI, flips vs ``baseline`` (question -> 0/1) and mean cost per question of one arm."""
    m = score(preds, golds, benchmark="gate", bootstrap_samples=bootstrap_samples, seed=seed)
    outcomes = question_outcomes(preds, golds)
    usages = [UsageRecord.from_dict(p.usage) for p in preds]
    common = [i for i in outcomes if i in baseline]
    # Paired on the same questions: the mean of (this arm - standalone) per question, resampling questions.
    diffs = [float(outcomes[i] - baseline[i]) for i in common]
    delta_ci = bootstrap_ci(diffs, bootstrap_samples, seed) if diffs else (None, None)
    tools_share = None
    if name == "gated" and threshold is not None:
        answered = {p.id for p in preds}
        sent = [r for r in records if r.id in answered and not r.confident(threshold)]
        tools_share = len(sent) / len(answered) if answered else None
    return {
        "arm": name,
        "threshold": threshold,
        "n": m.n,
        "accuracy": m.accuracy,
        "ci95_lo": m.ci95[0],
        "ci95_hi": m.ci95[1],
        "invalid_rate": m.invalid_rate,
        "missing": m.missing,
        "tools_share": tools_share,
        "delta": _mean(diffs),
        "delta_ci95_lo": delta_ci[0],
        "delta_ci95_hi": delta_ci[1],
        "right_to_wrong": sum(baseline[i] == 1 and outcomes[i] == 0 for i in common),
        "wrong_to_right": sum(baseline[i] == 0 and outcomes[i] == 1 for i in common),
        "llm_calls": _mean([float(u.llm_calls or 0) for u in usages]),
        "tokens": _mean([float((u.prompt_tokens or 0) + (u.completion_tokens or 0)) for u in usages]),
        "prompt_tokens": _mean([float(u.prompt_tokens or 0) for u in usages]),
        "evaluated_tokens": _mean([float(u.evaluated_tokens) for u in usages if u.evaluated_tokens is not None]),
        "completion_tokens": _mean([float(u.completion_tokens or 0) for u in usages]),
        "wall_s": _mean([p.latency_s for p in preds]),
    }  # fmt: skip


def sweep(
    predictions: Iterable[Prediction],
    golds: Mapping[str, Gold],
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    *,
    curve: bool = False,
    bootstrap_samples: int = 1000,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Standalone, full and gated-at-each-threshold records of one gated run (``arm_record``'s fields).

    With ``curve`` the gated arm is evaluated at every distinct confidence in the run too (each is an
    operating point of the Pareto curve), besides ``thresholds``.
    """
    records = [r for r in gate_records(predictions) if r.id in golds]
    if not records:
        return []
    points = set(thresholds)
    if curve:
        points |= {r.confidence for r in records if r.confidence is not None}
    base = question_outcomes(arm(records, "standalone"), golds)
    out = [
        arm_record(name, None, arm(records, name), golds, base, records, bootstrap_samples, seed)
        for name in ("standalone", "full")
    ]
    for t in sorted(points):
        out.append(
            arm_record("gated", t, arm(records, "gated", t), golds, base, records, bootstrap_samples, seed)
        )
    return out


def _f(x: float | None, digits: int = 1) -> str:
    return NA if x is None else f"{x:.{digits}f}"


def _delta(x: Mapping[str, Any]) -> str:
    if x["arm"] == "standalone" or x["delta"] is None:
        return NA
    return f"{100 * x['delta']:+.1f} [{100 * x['delta_ci95_lo']:+.1f}, {100 * x['delta_ci95_hi']:+.1f}]"


def sweep_table(
    runs: Sequence[Any], thresholds: Sequence[float], bootstrap_samples: int = 1000, seed: int = 0
) -> tuple[Table, Table]:
    """The report's gate tables over its ``gated`` runs (``medagent.report.loader.Run``): the arms at
    ``thresholds`` (markdown + CSV) and the Pareto curve at every distinct confidence (CSV, and the figure)."""
    t = Table("gate_sweep", "Confidence gate: standalone, full, and gated at each threshold (one run)")
    t.columns = ["run", "arm", "threshold", "n", "accuracy", "95% CI", "Δ vs standalone [paired 95% CI]",
                 "to tools %", "right→wrong", "wrong→right", "LLM calls/q", "tokens/q", "wall s/q"]  # fmt: skip
    curve = Table("gate_curve", "Confidence gate: every operating point (Pareto curve)")
    gated = [r for r in runs if r.key.mode == "gated" and not r.key.open_ended and r.golds]
    for r in gated:
        label = f"{r.key.benchmark} / {r.key.llm}"
        rows = sweep(
            r.predictions, r.golds, thresholds, curve=True, bootstrap_samples=bootstrap_samples, seed=seed
        )
        if not rows:
            t.notes.append(f"{r.path}: no gate step in the traces (run before the gate, or traces missing)")
            continue
        shown = [x for x in rows if x["arm"] != "gated" or x["threshold"] in set(thresholds)]
        for x in shown:
            t.records.append(
                {"label": label, "benchmark": r.key.benchmark, "llm": r.key.llm, **x, "run_dir": str(r.path)}
            )
            t.cells.append([
                label, x["arm"], NA if x["threshold"] is None else f"{x['threshold']:g}", str(x["n"]),
                pct(x["accuracy"]), f"[{pct(x['ci95_lo'])}, {pct(x['ci95_hi'])}]", _delta(x),
                pct(x["tools_share"], 0),
                str(x["right_to_wrong"]), str(x["wrong_to_right"]), _f(x["llm_calls"], 2), _f(x["tokens"], 0),
                _f(x["wall_s"], 1),
            ])  # fmt: skip
        curve.records += [{"label": label, **x} for x in rows]
        full = next(x for x in rows if x["arm"] == "full")
        if full["missing"]:
            t.notes.append(
                f"{label}: {full['missing']} question(s) have no tools answer (agent.gate.record_both=false): "
                "full and the higher thresholds are over fewer questions"
            )
    if not gated:
        t.notes.append("no multiple-choice agent=gated run (experiment=gate_sweep)")
    return t, curve


def side_by_side(predictions: Iterable[Prediction], golds: Mapping[str, Gold], threshold: float) -> str:
    """Per question: gold, standalone answer (confidence), full agent's answer and the gated one, then
    the three arms' accuracy and cost; what ``run_benchmark`` prints after a gated run."""
    records = gate_records(predictions)
    lines = [f"{'question':<14} {'gold':>4} {'standalone':>10} {'conf':>6} {'full':>5} {'gated':>6}"]
    for r in records:
        gold = golds[r.id].answer if r.id in golds else "?"
        conf = NA if r.confidence is None else f"{r.confidence:.2f}"
        gated = r.first_answer if r.confident(threshold) else (r.tools_answer or NA)
        lines.append(
            f"{r.id[:14]:<14} {gold:>4} {r.first_answer[:10]:>10} {conf:>6} {(r.tools_answer or NA)[:5]:>5} {gated[:6]:>6}"
        )
    rows = sweep(predictions, golds, [threshold]) if records else []
    lines.append("")
    lines.append(
        f"{'arm':<16} {'n':>3} {'accuracy':>8} {'LLM calls/q':>11} {'sent tok/q':>10} {'evaluated/q':>11} "
        f"{'decoded/q':>9} {'wall s/q':>8}"
    )
    for x in rows:
        name = x["arm"] if x["threshold"] is None else f"gated@{x['threshold']:g}"
        lines.append(
            f"{name:<16} {x['n']:>3} {x['accuracy']:>8.3f} {_f(x['llm_calls'], 2):>11} "
            f"{_f(x['prompt_tokens'], 0):>10} {_f(x['evaluated_tokens'], 0):>11} {_f(x['completion_tokens'], 0):>9} "
            f"{_f(x['wall_s'], 1):>8}"
        )
    return "\n".join(lines)
