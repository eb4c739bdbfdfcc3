"""Run directories opened for the viewer: benchmark runs through the report's loader, interview runs through
their rows, each summarised once at start (metrics with CI, config highlights, cost, departures).

Benchmark runs are scored by ``medagent.eval.scoring`` (the one scoring path); traces stay on disk until a
question is shown.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from medagent.eval import question_outcomes, score
from medagent.eval.stats import bootstrap_interval
from medagent.history.evaluation.row import InterviewRow
from medagent.llm.usage import UsageRecord
from medagent.report.loader import Run, find_run_dirs, labels, load_run
from medagent.run import RunDir
from medagent.types import INVALID, Question

BOOTSTRAP_SAMPLES = 1000
# An interview record's scores, averaged (with CI) on the runs view: the fact-level endpoints first (summary
# fact recall is the primary one), then the paper's text scores and the agent's own.
INTERVIEW_SCORES = (
    "summary_fact_recall", "summary_fact_precision", "elicited_fact_recall", "patient_answered",
    "rouge_l", "bertscore_f1", "red_flag_recall", "differential_hit", "redundant_rate",
)  # fmt: skip


@dataclass
class Cell:
    """One run's outcome on one question: ``status`` is right, wrong, invalid, error or answered (no gold)."""

    answer: str
    status: str
    tokens: int
    latency_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "status": self.status,
            "tokens": self.tokens,
            "latency_s": self.latency_s,
        }


@dataclass
class ViewRun:
    """One run directory as the viewer shows it (``kind`` is ``qa`` or ``interview``)."""

    index: int
    path: Path
    kind: str
    label: str = ""
    manifest: dict[str, Any] = field(default_factory=dict)
    run: Run | None = None
    questions: dict[str, Question] = field(default_factory=dict)
    cells: dict[str, Cell] = field(default_factory=dict)
    rows: list[InterviewRow] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def rundir(self) -> RunDir:
        return RunDir(self.path, read_only=True)


def _cells(run: Run) -> dict[str, Cell]:
    outcomes = question_outcomes(run.predictions, run.golds)
    out: dict[str, Cell] = {}
    for p in run.predictions:
        if p.error:
            status = "error"
        elif p.answer == INVALID:
            status = "invalid"
        elif p.id in outcomes:
            status = "right" if outcomes[p.id] else "wrong"
        else:
            status = "answered"
        usage = UsageRecord.from_dict(p.usage)
        tokens = (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
        out[p.id] = Cell(p.answer, status, tokens, round(p.latency_s, 3))
    return out


def _mean(values: list[float]) -> float | None:
    return round(fmean(values), 3) if values else None


def _highlights(
    config: dict[str, Any], manifest: dict[str, Any], metrics: dict[str, Any] | None
) -> dict[str, Any]:
    agent = config.get("agent") or {}
    recipe = config.get("recipe") or manifest.get("recipe")
    index = config.get("index_dir") or (metrics or {}).get("index")
    return {
        "benchmark": (config.get("benchmark") or {}).get("name") or (metrics or {}).get("benchmark"),
        "mode": agent.get("mode") or (metrics or {}).get("agent"),
        "llm": (config.get("llm") or {}).get("name") or (metrics or {}).get("llm"),
        "recipe": recipe if isinstance(recipe, str) else (recipe or {}).get("name") if recipe else None,
        "index": index if isinstance(index, str) else (index or {}).get("dir") if index else None,
        "open_ended": agent.get("open_ended"),
        "git_sha": manifest.get("git_sha"),
    }


def _qa_summary(vr: ViewRun, run: Run) -> dict[str, Any]:
    usages = [UsageRecord.from_dict(p.usage) for p in run.predictions]
    summary: dict[str, Any] = {
        "n": len(run.predictions),
        "traced": run.n_traced,
        "cost": {
            "prompt_tokens": _mean([float(u.prompt_tokens or 0) for u in usages]),
            "completion_tokens": _mean([float(u.completion_tokens or 0) for u in usages]),
            "llm_calls": _mean([float(u.llm_calls) for u in usages if u.llm_calls is not None]),
            "latency_s": _mean([p.latency_s for p in run.predictions]),
        },
    }
    if run.golds and not run.key.open_ended:
        m = score(
            run.predictions, run.golds, benchmark=run.key.benchmark, bootstrap_samples=BOOTSTRAP_SAMPLES
        )
        summary["metrics"] = {
            "accuracy": m.accuracy,
            "ci95": list(m.ci95),
            "correct": m.correct,
            "scored": m.n,
            "invalid_rate": m.invalid_rate,
            "error_rate": m.error_rate,
            "missing": m.missing,
        }
    elif run.metrics:  # open-ended scores need the scoring models; shown as the run recorded them
        summary["recorded_metrics"] = {k: v for k, v in run.metrics.items() if isinstance(v, (int, float))}
    return summary


def _interview_summary(rows: list[InterviewRow]) -> dict[str, Any]:
    records = [r.record for r in rows if r.scored and r.record]
    scores: dict[str, Any] = {}
    for name in INTERVIEW_SCORES:
        values = [float(rec[name]) for rec in records if rec.get(name) is not None]
        if values:
            ci = bootstrap_interval(values, BOOTSTRAP_SAMPLES)
            scores[name] = {"mean": fmean(values), "ci95": [ci.low, ci.high], "n": len(values)}
    agent = [r.usages[0] for r in rows]
    return {
        "n": len(rows),
        "scored": sum(r.scored for r in rows),
        "skipped": sum(bool(r.skipped) for r in rows),
        "errors": sum(bool(r.error) for r in rows),
        "scores": scores,
        "cost": {
            "prompt_tokens": _mean([float(u.prompt_tokens or 0) for u in agent]),
            "completion_tokens": _mean([float(u.completion_tokens or 0) for u in agent]),
            "llm_calls": _mean([float(u.llm_calls) for u in agent if u.llm_calls is not None]),
            "latency_s": _mean([float(r.elapsed_s) for r in rows if r.elapsed_s is not None]),
        },
    }


def find_interview_dirs(patterns: list[str]) -> list[Path]:
    """Directories holding ``interviews.jsonl`` named by ``patterns`` (or below a named folder)."""
    marker = "interviews.jsonl"
    found: set[Path] = set()
    for pattern in patterns:
        for m in map(Path, sorted(glob.glob(str(Path(pattern).expanduser()), recursive=True))):
            if (m / marker).is_file():
                found.add(m.resolve())
            elif m.is_dir():
                found |= {
                    p.parent.resolve()
                    for p in m.rglob(marker)
                    if not any(part.startswith(".") for part in p.relative_to(m).parts)
                }
    return sorted(found)


def load_view(
    patterns: list[str], questions: dict[str, dict[str, Question]] | None = None
) -> tuple[list[ViewRun], list[str]]:
    """Every run named by ``patterns``; problems become notes. ``questions`` (benchmark -> id -> question)
    fills in question texts for runs written before they kept ``questions.jsonl``."""
    qa_paths, notes = find_run_dirs(patterns)
    interview_paths = [p for p in find_interview_dirs(patterns) if p not in set(qa_paths)]
    if interview_paths:  # a folder of interview runs alone is not a "matched nothing"
        notes = [n for n in notes if not any(n.startswith(f"`{pat}`") for pat in patterns)]
    out: list[ViewRun] = []
    runs: list[Run] = []
    for path in qa_paths:
        run, run_notes = load_run(path, traces=False)
        notes += run_notes
        if run is None:
            continue
        manifest = RunDir(path, read_only=True).read_json(RunDir(path, read_only=True).manifest) or {}
        vr = ViewRun(len(out), run.path, "qa", manifest=manifest, run=run)
        vr.questions = vr.rundir.load_questions() or dict((questions or {}).get(run.key.benchmark, {}))
        vr.cells = _cells(run)
        vr.summary = _qa_summary(vr, run) | {"config": _highlights(run.config, manifest, run.metrics)}
        out.append(vr)
        runs.append(run)
    names = labels(runs)
    for vr in out:
        assert vr.run is not None
        vr.label = names[vr.run.path]
    for path in interview_paths:
        rd = RunDir(path, read_only=True)
        manifest = rd.read_json(rd.manifest) or {}
        rows = [InterviewRow.from_dict(r) for r in rd.latest_records(rd.interviews, key="interview_id")]
        if not rows:
            notes.append(f"{path}: no interviews yet; skipped")
            continue
        config = manifest.get("config") or {}
        mode = (config.get("agent") or {}).get("mode") or rows[0].mode
        vr = ViewRun(len(out), path, "interview", label=f"interviews / {mode}", manifest=manifest, rows=rows)
        vr.summary = _interview_summary(rows) | {
            "config": _highlights(config, manifest, None) | {"mode": mode}
        }
        out.append(vr)
    # Two runs of one experiment get the same label; the folder tells them apart.
    seen: dict[str, int] = {}
    for vr in out:
        seen[vr.label] = seen.get(vr.label, 0) + 1
    for vr in out:
        if seen[vr.label] > 1:
            vr.label = f"{vr.label} ({vr.path.parent.name}/{vr.path.name})"
    for vr in out:
        departures = vr.manifest.get("departures") or (vr.manifest.get("config") or {}).get("departures")
        vr.summary |= {
            "index": vr.index,
            "kind": vr.kind,
            "label": vr.label,
            "path": str(vr.path),
            "departures": [str(d) if not isinstance(d, dict) else d for d in departures or []],
        }
    return out, notes
