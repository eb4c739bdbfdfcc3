"""Scores annotations against gold ones: per-category precision / recall / F1, micro and macro averages.

Joining predictions to golds by interview id happens here and nowhere else. A gold interview without a
prediction scores as an empty prediction (every gold item a false negative), never as skipped.

- **Findings** (rows ``positive``, ``negative``): per interview, the predicted and gold *sets* of canonical
  symptom names are compared (exact name match); counts are summed over interviews. ``diagnosis`` is
  scored the same way and reported on its own row, outside the findings averages.
- **Question categories**: questions are aligned by turn index (the annotator runs on the gold
  dialogue's own utterances, so indices coincide). For a category ``c``: TP = turns whose gold and
  predicted category are both ``c``; FP = turns predicted ``c`` whose gold category differs or which are
  not gold questions; FN = gold ``c`` turns predicted otherwise or not detected as questions. The
  ``question detection`` row scores "is this turn a question" regardless of category.
- **Averages**: micro = P/R/F1 of the summed TP/FP/FN; macro = unweighted mean of per-category P, R and F1
  over the categories with gold support or predictions (an absent, unpredicted category is not averaged).
  A 0/0 precision or recall counts as 0.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from medagent.interview.types import INQUIRY_CATEGORIES, Annotation


@dataclass(frozen=True)
class PRF:
    """Counts for one label; the rates are derived."""

    label: str
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def support(self) -> int:
        return self.tp + self.fn

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass(frozen=True)
class Average:
    label: str
    precision: float
    recall: float
    f1: float


def micro(rows: Iterable[PRF], label: str = "micro") -> Average:
    rows = list(rows)
    total = PRF(label, sum(r.tp for r in rows), sum(r.fp for r in rows), sum(r.fn for r in rows))
    return Average(label, total.precision, total.recall, total.f1)


def macro(rows: Iterable[PRF], label: str = "macro") -> Average:
    used = [r for r in rows if r.tp + r.fp + r.fn > 0]
    if not used:
        return Average(label, 0.0, 0.0, 0.0)
    n = len(used)
    return Average(
        label,
        sum(r.precision for r in used) / n,
        sum(r.recall for r in used) / n,
        sum(r.f1 for r in used) / n,
    )


def _set_prf(label: str, pairs: Iterable[tuple[Iterable[str], Iterable[str]]]) -> PRF:
    tp = fp = fn = 0
    for pred, gold in pairs:
        p, g = set(pred), set(gold)
        tp += len(p & g)
        fp += len(p - g)
        fn += len(g - p)
    return PRF(label, tp, fp, fn)


def _joined(
    preds: Mapping[str, Annotation], golds: Mapping[str, Annotation]
) -> list[tuple[Annotation, Annotation]]:
    out = []
    for gid, gold in golds.items():
        pred = preds.get(gid) or Annotation(interview_id=gid, source=gold.source, annotator="missing")
        out.append((pred, gold))
    return out


def finding_scores(preds: Mapping[str, Annotation], golds: Mapping[str, Annotation]) -> list[PRF]:
    """Rows ``positive``, ``negative`` and ``diagnosis`` (set comparison per interview, summed)."""
    pairs = _joined(preds, golds)
    return [
        _set_prf("positive", ((p.positive_findings, g.positive_findings) for p, g in pairs)),
        _set_prf("negative", ((p.negative_findings, g.negative_findings) for p, g in pairs)),
        _set_prf("diagnosis", ((p.diagnoses, g.diagnoses) for p, g in pairs)),
    ]


def question_scores(
    preds: Mapping[str, Annotation], golds: Mapping[str, Annotation]
) -> tuple[list[PRF], PRF]:
    """Per-category rows (in ``INQUIRY_CATEGORIES`` order) and the question-detection row."""
    counts = {c: [0, 0, 0] for c in INQUIRY_CATEGORIES}
    det = [0, 0, 0]
    for pred, gold in _joined(preds, golds):
        p = {q.turn: q.category for q in pred.questions}
        g = {q.turn: q.category for q in gold.questions}
        det[0] += len(p.keys() & g.keys())
        det[1] += len(p.keys() - g.keys())
        det[2] += len(g.keys() - p.keys())
        for turn in p.keys() | g.keys():
            pc, gc = p.get(turn), g.get(turn)
            if pc is not None and pc == gc:
                counts[pc][0] += 1
                continue
            if pc is not None:
                counts.setdefault(pc, [0, 0, 0])[1] += 1
            if gc is not None:
                counts.setdefault(gc, [0, 0, 0])[2] += 1
    rows = [PRF(c, *v) for c, v in counts.items()]
    return rows, PRF("question detection", *det)


@dataclass
class EvalReport:
    """Everything ``write_report`` prints; ``notes`` are conventions written next to the numbers."""

    annotator: str
    n_interviews: int
    findings: list[PRF]
    questions: list[PRF]
    detection: PRF
    notes: list[str] = field(default_factory=list)

    def finding_averages(self) -> list[Average]:
        rows = [r for r in self.findings if r.label in ("positive", "negative")]
        return [micro(rows, "findings micro"), macro(rows, "findings macro")]

    def question_averages(self) -> list[Average]:
        return [micro(self.questions, "categories micro"), macro(self.questions, "categories macro")]

    def to_dict(self) -> dict[str, object]:
        def row(x: PRF | Average) -> dict[str, object]:
            d: dict[str, object] = {"precision": x.precision, "recall": x.recall, "f1": x.f1}
            if isinstance(x, PRF):
                d.update(tp=x.tp, fp=x.fp, fn=x.fn, support=x.support)
            return d

        return {
            "annotator": self.annotator,
            "n_interviews": self.n_interviews,
            "findings": {r.label: row(r) for r in self.findings},
            "findings_averages": {a.label: row(a) for a in self.finding_averages()},
            "questions": {r.label: row(r) for r in self.questions},
            "question_averages": {a.label: row(a) for a in self.question_averages()},
            "question_detection": row(self.detection),
        }


def score_annotations(
    preds: Mapping[str, Annotation], golds: Mapping[str, Annotation], annotator: str = ""
) -> EvalReport:
    """Scores ``preds`` against ``golds`` (both keyed by interview id)."""
    findings = finding_scores(preds, golds)
    questions, detection = question_scores(preds, golds)
    notes = ["### Scoring\n" + (__doc__ or "")]
    return EvalReport(annotator, len(golds), findings, questions, detection, notes=notes)


def _table(rows: list[PRF | Average]) -> list[str]:
    lines = ["| label | precision | recall | F1 | TP | FP | FN |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        counts = f"{r.tp} | {r.fp} | {r.fn}" if isinstance(r, PRF) else " | | "
        if isinstance(r, PRF) and r.tp + r.fp + r.fn == 0:
            rates = "n/a | n/a | n/a"  # no gold item and no prediction: not averaged either
        else:
            rates = f"{r.precision:.3f} | {r.recall:.3f} | {r.f1:.3f}"
        lines.append(f"| {r.label} | {rates} | {counts} |")
    return lines


def format_markdown(report: EvalReport, extra_notes: Iterable[str] = ()) -> str:
    findings: list[PRF | Average] = [*report.findings, *report.finding_averages()]
    questions: list[PRF | Average] = [*report.questions, *report.question_averages(), report.detection]
    parts = [
        f"# Annotation quality: `{report.annotator}` against {report.n_interviews} gold MediTOD dialogues",
        "",
        "## Findings and diagnoses",
        *_table(findings),
        "",
        "## Question categories",
        *_table(questions),
        "",
        "## Conventions",
        *(n.strip() for n in (*extra_notes, *report.notes) if n.strip()),
        "",
    ]
    return "\n".join(parts)


def write_report(report: EvalReport, md_path: Path, csv_path: Path, extra_notes: Iterable[str] = ()) -> None:
    """Writes the markdown tables and one CSV with every row (section, label, P, R, F1, counts)."""
    md_path.write_text(format_markdown(report, extra_notes), encoding="utf-8")
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["section", "label", "precision", "recall", "f1", "tp", "fp", "fn", "support"])
        sections: list[tuple[str, list[PRF | Average]]] = [
            ("findings", [*report.findings, *report.finding_averages()]),
            ("questions", [*report.questions, *report.question_averages(), report.detection]),
        ]
        for section, rows in sections:
            for r in rows:
                counts = [r.tp, r.fp, r.fn, r.support] if isinstance(r, PRF) else ["", "", "", ""]
                empty = isinstance(r, PRF) and r.tp + r.fp + r.fn == 0
                rates = ["", "", ""] if empty else [f"{r.precision:.4f}", f"{r.recall:.4f}", f"{r.f1:.4f}"]
                w.writerow([section, r.label, *rates, *counts])
