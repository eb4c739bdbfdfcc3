"""Tool usage from traces (the QA paper, Fig. 2): mean calls per tool per question, and how many times a question
called a tool (1-8, more than 8).

A trace step with ``kind == "tool"`` is one tool invocation; its ``tool`` field names the tool (see
``medagent.agent.episode.ToolStep``). ``final_answer`` is how the model answers, not a tool, and is left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from medagent.llm.usage import UsageRecord
from medagent.report.loader import Run, labels
from medagent.report.table import NA, Table
from medagent.types import Prediction

ANSWER_TOOL = "final_answer"
# Fig. 2a's order: the paper's five tools (generate_options replaces nothing; it is the open-ended one).
PAPER_TOOLS = (
    "perform_comparison",
    "generate_options",
    "enable_search",
    "relevance_analysis",
    "locate_evidence",
)
# Fig. 2b's tools (the paper's: the two cache-and-prune tools).
DISTRIBUTION_TOOLS = ("relevance_analysis", "locate_evidence")
ALL_TOOLS = "all tools"
MAX_BIN = 8
BINS = tuple(str(i) for i in range(1, MAX_BIN + 1)) + (f">{MAX_BIN}",)


def call_status(step: dict[str, Any]) -> str:
    """``worked`` (the tool ran and did its work), ``no_op`` (it ran but raised a ``ToolError``: nothing to
    review, a document not in the batch, ...) or ``refused`` (the agent did not run it: malformed, repeated,
    unknown, over the per-reply limit). Traces written before ``executed`` / ``ok`` count as worked."""
    if not bool(step.get("executed", True)):
        return "refused"
    return "worked" if bool(step.get("ok", True)) else "no_op"


def tool_calls(pred: Prediction, status: str = "worked") -> Counter[str]:
    """Calls per tool in one question's trace whose ``call_status`` is ``status``; Fig. 2 counts only the
    calls that did work, as the paper's counts are of tools that ran."""
    return Counter(
        str(s.get("tool"))
        for s in pred.trace
        if isinstance(s, dict)
        and s.get("kind") == "tool"
        and s.get("tool") != ANSWER_TOOL
        and call_status(s) == status
    )


def llm_calls(pred: Prediction) -> float | None:
    """LLM calls of one question: ``usage["llm_calls"]``, else counted from the trace (a step that reports
    its own prompt tokens is one call; a tool step reports its calls), else None."""
    counted = UsageRecord.from_dict(pred.usage).llm_calls
    if counted is not None:
        return float(counted)
    if not pred.trace:
        return None
    n = 0
    for s in pred.trace:
        if s.get("kind") == "tool":
            n += int(s.get("llm_calls") or 0)
        elif "prompt_tokens" in s:
            n += 1
    return float(n)


def bin_of(count: int) -> str | None:
    """Fig. 2b's bin of a per-question call count (None for 0: the question did not call the tool)."""
    if count <= 0:
        return None
    return str(count) if count <= MAX_BIN else f">{MAX_BIN}"


def traced(runs: Sequence[Run], modes: Sequence[str]) -> tuple[list[Run], list[str]]:
    """The runs of ``modes`` that have traces, and notes for those without."""
    out, notes = [], []
    for r in runs:
        if r.key.mode not in modes:
            continue
        if r.n_traced == 0:
            notes.append(f"{r.path}: no traces; left out of the tool-usage figures")
            continue
        if r.n_traced < len(r.predictions):
            notes.append(
                f"{r.path}: {len(r.predictions) - r.n_traced} of {len(r.predictions)} traces missing"
            )
        out.append(r)
    return out, notes


def _tool_order(counts: Sequence[Counter[str]], preferred: Sequence[str]) -> list[str]:
    seen = set().union(*counts) if counts else set()
    return [t for t in preferred if t in seen] + sorted(seen - set(preferred))


def tool_usage_table(runs: Sequence[Run], modes: Sequence[str], tools: Sequence[str] = PAPER_TOOLS) -> Table:
    """Fig. 2a's data: mean invocations of each tool per question, per run (traced questions only)."""
    t = Table(
        "fig2a_tool_calls",
        "Fig. 2a data. Mean calls per tool per question that did work (refused and no-op apart)",
    )
    used, t.notes = traced(runs, modes)
    per_run = {r.path: [tool_calls(p) for p in r.predictions if p.trace] for r in used}
    order = _tool_order([sum(c, Counter()) for c in per_run.values()], tools)
    names = labels(used)
    t.columns = ["run", "n", *order, "refused/q", "no-op/q"]
    for r in used:
        counts = per_run[r.path]
        refused = [tool_calls(p, "refused") for p in r.predictions if p.trace]
        no_op = [tool_calls(p, "no_op") for p in r.predictions if p.trace]
        n = len(counts)
        means = {tool: sum(c[tool] for c in counts) / n if n else 0.0 for tool in order}
        t.records += [
            {"label": names[r.path], "benchmark": r.key.benchmark, "llm": r.key.llm, "mode": r.key.mode,
             "top_r": r.key.top_r, "tool": tool, "n": n, "mean_calls": means[tool],
             "total_calls": sum(c[tool] for c in counts), "total_refused": sum(c[tool] for c in refused),
             "mean_refused": sum(c[tool] for c in refused) / n if n else 0.0,
             "total_no_op": sum(c[tool] for c in no_op), "mean_no_op": sum(c[tool] for c in no_op) / n if n else 0.0}
            for tool in order
        ]  # fmt: skip
        all_refused = sum(sum(c.values()) for c in refused) / n if n else 0.0
        all_no_op = sum(sum(c.values()) for c in no_op) / n if n else 0.0
        t.cells.append(
            [
                names[r.path],
                str(n),
                *(f"{means[tool]:.2f}" for tool in order),
                f"{all_refused:.2f}",
                f"{all_no_op:.2f}",
            ]
        )
    if not used:
        t.notes.append(f"no traced run of mode {', '.join(modes)}")
    elif not order:
        t.notes.append("the traces hold no tool call")
    return t


def tool_distribution_table(
    runs: Sequence[Run], modes: Sequence[str], tools: Sequence[str] = DISTRIBUTION_TOOLS
) -> Table:
    """Fig. 2b's data: per run and tool (and all tools together), the number of questions with 1..8 and
    more than 8 calls, and the share of each among the questions that called the tool at all."""
    t = Table("fig2b_tool_call_distribution", "Fig. 2b data. Questions by number of calls to a tool")
    used, t.notes = traced(runs, modes)
    names = labels(used)
    t.columns = ["run", "tool", "questions", "0 calls", *BINS]
    for r in used:
        counts = [tool_calls(p) for p in r.predictions if p.trace]
        for tool in [*tools, ALL_TOOLS]:
            per_q = [sum(c.values()) if tool == ALL_TOOLS else c[tool] for c in counts]
            hist = Counter(b for b in (bin_of(k) for k in per_q) if b is not None)
            called = sum(hist.values())
            rec: dict[str, Any] = {"label": names[r.path], "benchmark": r.key.benchmark, "llm": r.key.llm,
                                   "mode": r.key.mode, "top_r": r.key.top_r, "tool": tool,
                                   "questions": len(per_q), "zero": len(per_q) - called}  # fmt: skip
            rec.update({f"n_{b}": hist[b] for b in BINS})
            rec.update({f"share_{b}": hist[b] / called if called else 0.0 for b in BINS})
            t.records.append(rec)
            t.cells.append(
                [names[r.path], tool, str(len(per_q)), str(rec["zero"]), *(str(hist[b]) for b in BINS)]
            )
    if not used:
        t.notes.append(f"no traced run of mode {', '.join(modes)}")
    return t


def _per(total: float | None, n: int) -> float | None:
    return None if total is None or not n else total / n


def call_kind_rows(usages: Sequence[UsageRecord]) -> list[dict[str, Any]]:
    """Per kind of model call (``UsageRecord.by_tag``), then ``all``: calls, tokens sent / cached /
    evaluated / decoded and seconds (wall, engine prompt, engine decode), each per question (or interview)
    of ``usages``. A figure no call of a kind reported is None."""
    n = len(usages)
    kinds: dict[str, UsageRecord] = {}
    for u in usages:
        for kind, rec in (u.by_tag or {}).items():
            kinds[kind] = kinds.get(kind, UsageRecord()) + rec
    kinds["all"] = sum(usages, UsageRecord())
    rows = []
    for kind, u in kinds.items():
        rows.append(
            {"kind": kind, "n": n, "calls": _per(u.llm_calls, n), "sent": _per(u.prompt_tokens, n),
             "cached": _per(u.cached_tokens, n), "evaluated": _per(u.evaluated_tokens, n),
             "decoded": _per(u.completion_tokens, n), "llm_s": _per(u.llm_s, n),
             "prompt_s": _per(u.prompt_s, n), "decode_s": _per(u.decode_s, n), "hit_rate": u.hit_rate}
        )  # fmt: skip
    return rows


COST_BY_CALL_COLUMNS = ["calls/q", "sent/q", "evaluated/q", "decoded/q", "hit %", "LLM s/q", "prompt s/q",
                        "decode s/q"]  # fmt: skip


def cost_by_call_cells(row: dict[str, Any]) -> list[str]:
    """``call_kind_rows``'s row as the cells of ``COST_BY_CALL_COLUMNS``."""

    def f(x: float | None, d: int = 0) -> str:
        return NA if x is None else f"{x:.{d}f}"

    hit = row["hit_rate"]
    return [f(row["calls"], 2), f(row["sent"]), f(row["evaluated"]), f(row["decoded"]),
            NA if hit is None else f"{100 * hit:.0f}", f(row["llm_s"], 1), f(row["prompt_s"], 1),
            f(row["decode_s"], 1)]  # fmt: skip


def cost_by_call_table(runs: Sequence[Run]) -> Table:
    """Where each run's model time goes: per kind of call, tokens sent / evaluated / decoded and time per
    question (from ``Prediction.usage``; runs written before calls were broken down show ``all`` only)."""
    t = Table(
        "cost_by_call", "Model cost per question by kind of call (sent, evaluated, decoded tokens; time)"
    )
    t.columns = ["run", "call", *COST_BY_CALL_COLUMNS]
    names = labels(runs)
    for r in runs:
        usages = [UsageRecord.from_dict(p.usage) for p in r.predictions]
        for row in call_kind_rows(usages):
            t.records.append({"label": names[r.path], "mode": r.key.mode, "llm": r.key.llm, **row})
            t.cells.append([names[r.path], row["kind"], *cost_by_call_cells(row)])
    if not runs:
        t.notes.append("no runs")
    return t
