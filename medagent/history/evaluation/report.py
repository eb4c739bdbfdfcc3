"""The report of a history-taking run: per-interview CSV, markdown report, figures, console table.

Reads the rows ``pipelines/run_interviews.py`` commits to ``interviews.jsonl`` (one per interview: the
output of ``runner.evaluate_interview``, or an ``error`` / ``skipped`` row). Figures are drawn on
``matplotlib.figure.Figure`` objects (no pyplot, no global backend switch):

- ``scores.png``: per-interview BERTScore F1 and ROUGE-L F1 against the physician's closing statement, one
  strip per run (this run and every ``compare`` run, e.g. amq beside single_shot), means marked;
- ``turns.png``: questions asked per interview, per run;
- ``timeline.png``: one amq interview turn by turn: completeness C and differential entropy after each
  answer, the phase of each question as a coloured band, red flags marked.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from medagent.history.agent.modes import history_mode
from medagent.history.evaluation import metrics as metrics_module
from medagent.history.evaluation.instrument import instrument_check, run_arm
from medagent.history.evaluation.metrics import InterviewRecord, aggregate
from medagent.history.evaluation.paired import PairedDifference, paired_markdown
from medagent.history.evaluation.row import InterviewRow

CSV_FIELDS = (
    "interview_id",
    "mode",
    "valid",
    "n_turns",
    "asked",
    "blocked",
    "bertscore_f1",
    "rouge_l",
    "red_flag_recall",
    "differential_hit",
    "differential_top3_hit",
    "n_facts",
    "elicited_fact_recall",
    "summary_fact_recall",
    "summary_fact_precision",
    "repeat_rate_lexical",
    "refused_slots",
    "refused_flags",
    "patient_answered",
    "finish_reason",
    "elapsed_s",
    "llm_calls",
    "error",
)
PHASE_COLOURS = {
    "triage": "#cfe2f3",
    "hypothesis_formation": "#d9ead3",
    "deep_dive": "#fff2cc",
    "confirmation": "#f4cccc",
}
TABLE_METRICS = (
    ("summary fact recall", "summary_fact_recall", 3),  # the primary endpoint (facts_metrics)
    ("summary fact precision", "summary_fact_precision", 3),
    ("elicited fact recall", "elicited_fact_recall", 3),
    ("questions the patient answered", "patient_answered", 3),  # after the opening; the rest: "I don't know"
    ("top-3 differential hit", "differential_top3_hit_rate", 3),
    ("BERTScore F1", "bertscore_f1", 3),
    ("ROUGE-L F1", "rouge_l_f1", 3),
    ("turns", "turns_mean", 1),
    ("blocked", "blocked_rate", 3),
    ("repeats (lexical)", "repeat_rate_lexical", 3),
    ("slot values refused / interview", "refused_slots_mean", 1),  # grounding (agent.grounding)
    ("red flags refused / interview", "refused_flags_mean", 1),
    ("red-flag recall", "red_flag_recall", 3),
    ("differential hit", "differential_hit_rate", 3),  # MediTOD gold, else the physician's lexicon diagnoses
    (
        "simulator polarity agrees",
        "sim_polarity_agreement",
        3,
    ),  # medagent.history.evaluation.fidelity (lexicon)
    ("simulator discloses", "sim_disclosure_rate", 3),
    ("invalid", "invalid_rate", 3),
    ("s / interview", "seconds_mean", 0),
)


def error_record(row: dict[str, Any]) -> InterviewRecord:
    """The record of an interview whose endpoint failed (left out of every mean, counted in ``errors``)."""
    r = InterviewRow.from_dict(row)
    return InterviewRecord(
        interview_id=r.interview_id,
        source=r.source,
        mode=r.mode or "",
        prediction="",
        reference=r.reference.get("statement", ""),
        reference_usable=bool(r.reference.get("usable", False)),
        valid=False,
        n_turns=0,
        asked=0,
        blocked=0,
        blocked_rate=0.0,
        redundant_rate=0.0,
        finish_reason="error",
        error=row["error"],
    )


@dataclass
class RunRecords:
    """One run's rows split into scored records, endpoint failures and skipped interviews."""

    label: str
    rows: dict[str, dict[str, Any]]
    records: list[InterviewRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @classmethod
    def from_rows(cls, label: str, rows: Sequence[dict[str, Any]]) -> RunRecords:
        out = cls(label, {r["interview_id"]: r for r in rows})
        for r in out.rows.values():
            if r.get("error"):
                out.records.append(error_record(r))
            elif r.get("skipped"):
                out.skipped.append(r["interview_id"])
            else:
                out.records.append(InterviewRecord.from_dict(r["record"]))
        return out

    def metrics(self) -> dict[str, Any]:
        """``aggregate`` (the interview metrics) plus skipped interviews and wall time per interview."""
        ok = [self.rows[r.interview_id] for r in self.records if r.error is None]
        secs = [float(r["elapsed_s"]) for r in ok if r.get("elapsed_s") is not None]
        calls = [_calls(r) for r in ok]
        return aggregate(self.records) | {
            "skipped": len(self.skipped),
            "seconds_mean": sum(secs) / len(secs) if secs else None,
            "llm_calls_mean": sum(calls) / len(calls) if calls else None,
            "llm_time_by_kind": time_by_kind(ok),
        }


def _calls(row: dict[str, Any]) -> int:
    """Model calls of one interview: the agent's, the simulator's and the evaluation's (judge, red flags)."""
    return sum(u.llm_calls or 0 for u in InterviewRow.from_dict(row).usages)


def time_by_kind(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean model calls, seconds and completion tokens per interview, by kind of call (question, update,
    patient, fidelity judge...): where an interview's time goes. Rows without ``by_tag`` add nothing."""
    total: dict[str, dict[str, float]] = {}
    for row in rows:
        for usage in InterviewRow.from_dict(row).usages:
            for kind, u in (usage.by_tag or {}).items():
                t = total.setdefault(kind, {"calls": 0.0, "latency_s": 0.0, "completion_tokens": 0.0})
                t["calls"] += u.llm_calls or 0
                t["latency_s"] += u.llm_s or 0.0
                t["completion_tokens"] += u.completion_tokens or 0
    n = max(len(rows), 1)
    return {k: {m: round(v / n, 2) for m, v in t.items()} for k, t in sorted(total.items())}


def write_csv(run: RunRecords, path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in sorted(run.records, key=lambda x: x.interview_id):
            row = run.rows[r.interview_id]
            d = r.to_dict()
            w.writerow(
                {k: d.get(k) for k in CSV_FIELDS}
                | {"elapsed_s": row.get("elapsed_s"), "llm_calls": _calls(row) if r.error is None else None}
            )


def write_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """A CSV of plain rows (header from the first); an empty file when there are none."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        if rows:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


def _fmt(v: Any, digits: int) -> str:
    return "-" if v is None else f"{float(v):.{digits}f}"


def format_table(runs: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """Markdown table, one row per run."""
    head = "| run | n | errors | skipped | " + " | ".join(name for name, _, _ in TABLE_METRICS) + " |"
    lines = [head, "|" + "---|" * (4 + len(TABLE_METRICS))]
    for label, m in runs:
        cells = [label, str(m.get("n", 0)), str(m.get("errors", 0)), str(m.get("skipped", 0))]
        cells += [_fmt(m.get(key), d) for _, key, d in TABLE_METRICS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ figures
def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    return path


def scores_figure(runs: Sequence[RunRecords], path: Path) -> Path:
    """Per-interview BERTScore F1 and ROUGE-L F1, one strip of points per run, the mean as a bar."""
    fig = Figure(figsize=(8.0, 3.6))
    axes = fig.subplots(1, 2)
    panels = (("BERTScore F1", "bertscore_f1"), ("ROUGE-L F1", "rouge_l"))
    for ax, (title, attr) in zip(axes, panels, strict=True):
        for i, run in enumerate(runs):
            ys = [getattr(r, attr) for r in run.records if r.error is None and getattr(r, attr) is not None]
            xs = [i + 0.08 * ((k % 5) - 2) for k in range(len(ys))]
            ax.scatter(xs, ys, s=18, alpha=0.7, label=run.label)
            if ys:
                ax.hlines(sum(ys) / len(ys), i - 0.3, i + 0.3, colors="black", linewidth=2)
        ax.set_xticks(range(len(runs)), [r.label for r in runs], rotation=15)
        ax.set_xlim(-0.6, len(runs) - 0.4)
        ax.set_ylim(0, 1)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("per interview (bar: mean)")
    return _save(fig, path)


def turns_figure(runs: Sequence[RunRecords], path: Path) -> Path:
    """Questions asked per interview, a histogram per run."""
    fig = Figure(figsize=(5.5, 3.4))
    ax = fig.subplots()
    turns = [[r.n_turns for r in run.records if r.error is None] for run in runs]
    top = max((max(t) for t in turns if t), default=1)
    bins = [x - 0.5 for x in range(top + 2)]
    for run, t in zip(runs, turns, strict=True):
        if t:
            ax.hist(t, bins=bins, alpha=0.6, label=f"{run.label} (mean {sum(t) / len(t):.1f})")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("turns (questions asked; single_shot: 1)")
    ax.set_ylabel("interviews")
    ax.legend(fontsize=8)
    return _save(fig, path)


def timeline_figure(row: dict[str, Any], path: Path) -> Path | None:
    """One amq interview: phase bands, completeness and entropy after each answer, red flags."""
    interview = InterviewRow.from_dict(row)
    turns = interview.turns
    if not turns:
        return None
    fig = Figure(figsize=(8.0, 3.6))
    ax = fig.subplots()
    xs = [t.turn + 1 for t in turns]
    for x, t in zip(xs, turns, strict=True):
        ax.axvspan(x - 0.5, x + 0.5, color=PHASE_COLOURS.get(t.phase, "#eeeeee"), linewidth=0)
    ax.plot(xs, [t.completeness for t in turns], marker="o", label="completeness C")
    ax.plot(xs, [t.entropy for t in turns], marker="s", label="differential entropy")
    seen: set[str] = set()
    for x, t in zip(xs, turns, strict=True):
        new = [f for f in t.red_flags or () if f not in seen]
        seen.update(new)
        if new:
            ax.annotate("red flag: " + ", ".join(new), (x, 0.95), fontsize=7, color="darkred", rotation=90,
                        ha="center", va="top")  # fmt: skip
    for phase, colour in PHASE_COLOURS.items():
        ax.bar(0, 0, color=colour, label=phase.replace("_", " "))
    ax.set_xlim(0.5, len(xs) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("turn (question asked)")
    ax.set_title(f"{interview.interview_id}: {interview.finish_reason}", fontsize=9)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _save(fig, path)


def pick_timeline(run: RunRecords, wanted: str | None = None) -> dict[str, Any] | None:
    """The interview to draw: ``wanted``, else the scored amq interview with the most turns."""
    if wanted:
        return run.rows.get(wanted)
    rows = [
        run.rows[r.interview_id]
        for r in run.records
        if r.error is None and history_mode(r.mode).asks_questions
    ]
    return max(rows, key=lambda r: len(r["result"]["turns"]), default=None)


# ------------------------------------------------------------------------------------------- report
def write_report(
    runs: Sequence[RunRecords],
    metrics: Sequence[dict[str, Any]],
    figures: Sequence[Path],
    path: Path,
    *,
    title: str,
    paired: Sequence[PairedDifference] = (),
    scoring: str = "",
    instrument: str | None = None,
) -> str:
    """The markdown report (this run first, then the compared runs); returns its text. It opens with the
    instrument check (``instrument.instrument_check``), failed or passed, or with ``instrument``: where the
    check is (an arm of a multi-arm run is checked in the run's own report).

    ``paired`` are the per-interview paired differences against each compared run; ``scoring`` names the
    BERTScore backbone (written under the table, so no figure is read without it).
    """
    main = runs[0]
    check = instrument or instrument_check([(run_arm(r.rows, r.label), r.records) for r in runs]).markdown()
    lines = [
        f"# {title}",
        "",
        check,
        "",
        format_table([(r.label, m) for r, m in zip(runs, metrics, strict=True)]),
        "",
    ]
    if scoring:
        lines += [scoring, ""]
    if paired:
        lines += [
            "## Paired differences (same interviews)",
            "",
            "B - A per interview over the interviews both arms scored; mean with a bootstrap 95% CI (BCa) "
            "(pairs resampled) and the two-sided Wilcoxon signed-rank p (zero differences dropped). The "
            "per-interview values are in paired.csv. `single_shot:full` reads the physician's whole "
            "interview: an oracle upper bound, not the baseline (`single_shot:opening`).",
            "",
            paired_markdown(paired),
            "",
        ]
    lines += [f"![{p.stem}](figures/{p.name})" for p in figures] + [""]
    failed = [r for r in main.records if r.error]
    if failed:
        lines += ["## Endpoint failures", ""] + [f"- {r.interview_id}: {r.error}" for r in failed] + [""]
    if main.skipped:
        lines += ["## Skipped (no usable closing statement)", "", ", ".join(main.skipped), ""]
    example = next((r for r in main.records if r.error is None and r.prediction), None)
    if example:
        lines += [
            f"## Example: {example.interview_id}",
            "",
            f"**Agent** ({example.n_turns} turns, {example.finish_reason}): {example.prediction}",
            "",
            f"**Physician**: {example.reference}",
            "",
        ]
    timing = [(r.label, m.get("llm_time_by_kind") or {}) for r, m in zip(runs, metrics, strict=True)]
    if any(t for _, t in timing):
        lines += [
            "## Model time per interview, by kind of call",
            "",
            "Means per interview (agent, simulated patient and evaluation calls; seconds include queueing).",
            "",
            "| run | call | calls | seconds | completion tokens |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {label} | {kind} | {u['calls']:.1f} | {u['latency_s']:.1f} | {u['completion_tokens']:.0f} |"
            for label, t in timing
            for kind, u in t.items()
        ] + [""]
    lines += ["## Metrics", "", (metrics_module.__doc__ or "").split("\n", 2)[-1].strip(), ""]
    text = "\n".join(lines)
    path.write_text(text, encoding="utf-8")
    return text
