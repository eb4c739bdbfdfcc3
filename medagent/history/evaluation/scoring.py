"""Scoring a finished history-taking run: every row of its run dir, against the physician's closing statement.

Reads the rows of ``interviews.jsonl`` (the latest attempt of each interview), scores them with one
BERTScore scorer for this run and every compared run (rows keep no BERTScore), adds the checks that need
the whole transcript set (lexical repeats, lexical simulator fidelity, the physician's diagnoses where no
MediTOD gold exists) and the paired differences against each compared run, then writes the CSV, figures,
``report.md`` and ``metrics.json``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from medagent.config import InterviewRunConfig
from medagent.history.evaluation.fidelity import FidelityScorer, add_lexical_fidelity
from medagent.history.evaluation.metrics import (
    BertScorer,
    add_bertscore,
    add_lexical_repeats,
    add_physician_hits,
    disease_canonical,
    physician_diagnoses,
)
from medagent.history.evaluation.paired import paired_table, pairs_csv_rows
from medagent.history.evaluation.repeats import TopicRepeats
from medagent.history.evaluation.report import (
    RunRecords,
    format_table,
    pick_timeline,
    scores_figure,
    timeline_figure,
    turns_figure,
    write_csv,
    write_report,
    write_rows,
)
from medagent.history.evaluation.runner import arm_name, closing_rule
from medagent.history.simulation.reference import extract_reference, visible_turns
from medagent.interview.transcripts import Interview
from medagent.run import RunDir

KEY = "interview_id"


def endpoint_failed(row: dict[str, Any]) -> bool:
    """An interview cut short by an LLM / retriever failure (``error``): the next run asks it again."""
    return bool(row.get("error"))


def load_run(label: str, root: Path, wanted: set[str] | None = None) -> RunRecords:
    rd = RunDir(root, read_only=True)
    rows = rd.latest_records(rd.interviews, KEY, endpoint_failed)
    return RunRecords.from_rows(label, [r for r in rows if wanted is None or r[KEY] in wanted])


def arm_label(rows: RunRecords, fallback: str) -> str:
    """The run's arm (``arm`` of its rows, e.g. ``single_shot:opening``; older rows: their mode)."""
    arms = {str(r.get("arm") or r.get("mode") or "") for r in rows.rows.values() if not r.get("skipped")}
    return arms.pop() if len(arms) == 1 and "" not in arms else fallback


def scoring_note(cfg: InterviewRunConfig) -> str:
    m = cfg.eval.bertscore_model
    return (
        f"BERTScore F1 backbone: {m.hub_id or m.name}, layer {cfg.eval.bertscore_num_layers}, no baseline "
        "rescaling (every run of this report re-scored with it). Differential hit: MediTOD gold where "
        "annotated, else the physician's diagnoses found by the lexicon annotator in the full transcript."
    )


def score_run(
    cfg: InterviewRunConfig, rd: RunDir, interviews: list[Interview], *, instrument: str | None = None
) -> tuple[dict[str, Any], str]:
    """Scores every row of the run (BERTScore once), writes CSV, metrics, figures and the report.

    Returns:
        The run's metrics (also written to ``metrics.json``) and the console table of every compared arm.
    """
    ids = {iv.id for iv in interviews}
    run = load_run(arm_name(cfg.agent), rd.root, ids)
    scorer = BertScorer.from_config(cfg.eval)
    add_bertscore(run.records, scorer)
    # Compared runs are read over this run's interviews only: every row of the table is then over the same
    # items, and their sources and physician diagnoses (built from `interviews`) cover all their rows.
    compared = [load_run(Path(p).name, Path(p), ids) for p in cfg.compare]
    for other in compared:  # rows keep no BERTScore: it is computed per report, with this run's scorer
        other.label = arm_label(other, other.label)
        add_bertscore(other.records, scorer)
    runs = [run, *compared]
    repeats = TopicRepeats.from_data_root(cfg.data_root)
    fidelity = FidelityScorer.from_data_root(cfg.data_root)
    rule = closing_rule(cfg.eval)
    sources = {  # what the simulator was grounded in: the visible turns
        iv.id: replace(iv, turns=visible_turns(iv, extract_reference(iv, rule))) for iv in interviews
    }
    for r in runs:  # a second opinion on repeated questions, sharing nothing with the blocking control
        add_lexical_repeats(r.records, r.rows, repeats)
        add_lexical_fidelity(r.records, r.rows, sources, fidelity)
    if cfg.interviews.source != "meditod":  # MediTOD rows were scored against the annotated gold
        gold = physician_diagnoses(interviews, cfg.data_root)
        canonical = disease_canonical(cfg.data_root)
        for r in runs:
            add_physician_hits(r.records, gold, canonical)
    paired = [
        d
        for other in compared
        for d in paired_table(other.records, run.records, arm_a=other.label, arm_b=run.label, seed=cfg.seed)
    ]
    metrics = [r.metrics() for r in runs]
    write_csv(run, rd.interviews_csv)
    write_rows(rd.root / "paired.csv", pairs_csv_rows(paired))
    rd.figures_dir.mkdir(exist_ok=True)
    figures = [
        scores_figure(runs, rd.figures_dir / "scores.png"),
        turns_figure(runs, rd.figures_dir / "turns.png"),
    ]
    row = next((pick_timeline(r, cfg.timeline_interview) for r in runs if pick_timeline(r)), None)
    if row is not None and (fig := timeline_figure(row, rd.figures_dir / "timeline.png")):
        figures.append(fig)
    title = f"History taking: {cfg.interviews.name}, arm={run.label}, llm={cfg.llm.name}"
    write_report(
        runs, metrics, figures, rd.report_md, title=title, paired=paired, scoring=scoring_note(cfg),
        instrument=instrument,
    )  # fmt: skip
    result = metrics[0] | {
        "arm": run.label,
        "paired": [{k: v for k, v in d.to_dict().items() if k != "pairs"} for d in paired],
        "run_dir": str(rd.root),
        "interviews": cfg.interviews.name,
        "agent": cfg.agent.mode,
        "llm": cfg.llm.name,
        "compare": {r.label: m for r, m in zip(compared, metrics[1:], strict=True)},
    }
    rd.write_json(rd.metrics, result)
    return result, format_table([(r.label, m) for r, m in zip(runs, metrics, strict=True)])
