"""The report of a set of runs: tables (markdown + CSV) and figures (PNG) regenerated from run directories.

``build_report`` loads the runs, computes every table and figure, and writes ``report.md``, one CSV per
table, the PNGs and ``summary.json`` into one folder. Missing pieces (no standalone run, no traces, a
pattern that matched nothing) become notes in the report.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medagent.data import resolve_data_root
from medagent.eval import BenchmarkMetrics
from medagent.report import figures
from medagent.report.evidence import evidence_by_source, gold_in_retrieved, own_evidence_retrieved
from medagent.report.gate import DEFAULT_THRESHOLDS, sweep_table
from medagent.report.loader import Run, describe, labels, load_runs, select_cells
from medagent.report.paper import (
    departures_table,
    fig3_vs_paper,
    lab_reference_table,
    paired_tests,
    table1_vs_paper,
    table2_vs_paper,
    table3_vs_paper,
)
from medagent.report.published import load_lab_reference, load_published
from medagent.report.table import Table
from medagent.report.tables import (
    ABLATIONS,
    GPT4_ACCURACY,
    ScorerFactory,
    cost_table,
    flip_table,
    mc_metrics,
    open_ended_metrics,
    table1,
    table2,
    table3,
    top_r_table,
)
from medagent.report.usage import (
    DISTRIBUTION_TOOLS,
    PAPER_TOOLS,
    cost_by_call_table,
    tool_distribution_table,
    tool_usage_table,
)

REPORT = "report.md"


@dataclass
class ReportOptions:
    """Knobs of the report (``conf/report.yaml``'s ``report`` node).

    Attributes:
        main_top_r: The TopR whose run fills Tables 1-3 when a sweep put several runs in one cell (paper: 32).
        ablations: Table 3's columns, compared with ``full``.
        tool_modes: Agent modes whose traces feed Fig. 2.
        tools: Fig. 2a's tool order (tools found in traces but not listed are appended).
        distribution_tools: Fig. 2b's panels (an "all tools" panel is added).
        flip_baseline: Flip rates compare this mode...
        flip_treatment: ...with this one, on the same benchmark, LLM and question ids.
        compute_open_ended: Score open-ended runs whose metrics.json has no ``open_ended`` entry (loads the
            ``open_scoring`` models); false leaves them out with a note.
        reference_accuracy: Fig. 3's reference accuracy per benchmark (the QA paper: Table 1's GPT-4).
        reference_name: Its name in the table and figure.
        gate_thresholds: The thresholds at which the gate table shows the gated agent of each
            ``agent=gated`` run (the Pareto figure uses every distinct confidence as well).
    """

    main_top_r: int = 32
    ablations: list[str] = field(default_factory=lambda: list(ABLATIONS))
    tool_modes: list[str] = field(default_factory=lambda: ["full"])
    tools: list[str] = field(default_factory=lambda: list(PAPER_TOOLS))
    distribution_tools: list[str] = field(default_factory=lambda: list(DISTRIBUTION_TOOLS))
    flip_baseline: str = "standalone"
    flip_treatment: str = "full"
    compute_open_ended: bool = True
    reference_accuracy: dict[str, float] = field(default_factory=lambda: dict(GPT4_ACCURACY))
    reference_name: str = "GPT-4"
    gate_thresholds: list[float] = field(default_factory=lambda: list(DEFAULT_THRESHOLDS))
    bootstrap_samples: int = 1000
    seed: int = 0
    # The paper's values (None: conf/published/qa_paper.yaml of this repository) and the data root holding
    # the lab's stored answers (usmle_paper/; None: the usual data root, and a note when there is none).
    published: str | None = None
    data_root: str | None = None


@dataclass
class Report:
    """What ``build_report`` produced."""

    runs: list[Run]
    tables: dict[str, Table]
    figures: dict[str, Path | None]
    notes: list[str]
    markdown: str
    out_dir: Path


def runs_table(runs: Sequence[Run]) -> Table:
    t = Table("runs", "Runs")
    t.columns = [
        "run",
        "benchmark",
        "llm",
        "mode",
        "top_r",
        "format",
        "predictions",
        "golds",
        "traces",
        "path",
    ]
    names = labels(runs)
    for r in runs:
        k = r.key
        fmt = "open-ended" if k.open_ended else "multiple choice"
        t.records.append(
            {"label": names[r.path], "benchmark": k.benchmark, "llm": k.llm, "mode": k.mode, "top_r": k.top_r,
             "open_ended": k.open_ended, "predictions": len(r.predictions), "golds": len(r.golds),
             "traces": r.n_traced, "run_dir": str(r.path)}
        )  # fmt: skip
        t.cells.append([names[r.path], k.benchmark, k.llm, k.mode, str(k.top_r), fmt, str(len(r.predictions)),
                        str(len(r.golds)), str(r.n_traced), f"`{r.path}`"])  # fmt: skip
    return t


def _figure_section(title: str, path: Path | None, out_dir: Path, why: str) -> str:
    if path is None:
        return f"### {title}\n\n_Not drawn: {why}._\n"
    return f"### {title}\n\n![{title}]({path.relative_to(out_dir)})\n"


def build_report(
    patterns: Sequence[str],
    out_dir: Path,
    options: ReportOptions | None = None,
    scorer_factory: ScorerFactory | None = None,
) -> Report:
    """Builds and writes the report of the runs named by ``patterns`` into ``out_dir``.

    Args:
        patterns: Run directories, glob patterns, or folders to search for runs.
        out_dir: Where ``report.md``, the CSVs and the PNGs go (created).
        options: Report knobs.
        scorer_factory: Loads the open-ended scoring models (called at most once, only when an open-ended
            run lacks stored metrics); None leaves such runs out with a note.
    """
    opts = options or ReportOptions()
    out_dir.mkdir(parents=True, exist_ok=True)
    runs, notes = load_runs(patterns)
    selected, select_notes = select_cells(runs, opts.main_top_r)
    notes += select_notes
    acc = mc_metrics(runs, opts.bootstrap_samples, opts.seed)
    factory = scorer_factory if opts.compute_open_ended else None
    open_metrics, open_notes = open_ended_metrics(selected, factory, opts.bootstrap_samples, opts.seed)
    t2 = table2(selected, open_metrics)
    t2.notes += open_notes
    mc_runs = [r for r in runs if not r.key.open_ended]
    gate, gate_curve = sweep_table(selected, opts.gate_thresholds, opts.bootstrap_samples, opts.seed)
    tables = {
        t.name: t
        for t in (
            runs_table(runs),
            table1(selected, acc),
            t2,
            table3(selected, acc, opts.ablations),
            top_r_table(mc_runs, acc, reference=opts.reference_accuracy, reference_name=opts.reference_name),
            tool_usage_table(selected, opts.tool_modes, opts.tools),
            tool_distribution_table(selected, opts.tool_modes, opts.distribution_tools),
            cost_table(runs),
            cost_by_call_table(runs),
            flip_table(selected, opts.flip_baseline, opts.flip_treatment),
            gate,
            gate_curve,
            evidence_by_source(selected),
            gold_in_retrieved(selected),
            own_evidence_retrieved(selected),
        )
    }
    tables.update(_beside_paper(runs, selected, acc, open_metrics, tables["fig3_top_r"], opts, notes))
    figs = {
        "fig2a": figures.fig2a(tables["fig2a_tool_calls"], out_dir / "fig2a_tool_calls.png"),
        "fig2b": figures.fig2b(
            tables["fig2b_tool_call_distribution"], out_dir / "fig2b_tool_call_distribution.png"
        ),
        "fig3": figures.fig3(tables["fig3_top_r"], out_dir / "fig3_top_r.png"),
        "gate_pareto": figures.gate_pareto(gate_curve, out_dir / "gate_pareto.png", opts.gate_thresholds),
    }
    for t in tables.values():
        t.write_csv(out_dir)
    markdown = render(runs, tables, figs, notes, out_dir)
    (out_dir / REPORT).write_text(markdown, encoding="utf-8")
    summary = {
        "runs": [{"run_dir": str(r.path), "key": describe(r.key)} for r in runs],
        "tables": {name: t.records for name, t in tables.items() if name != "runs"},
        "figures": {k: str(v) if v else None for k, v in figs.items()},
        "notes": notes + [n for t in tables.values() for n in t.notes],
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    return Report(runs, tables, figs, notes, markdown, out_dir)


def _beside_paper(
    runs: Sequence[Run],
    selected: Sequence[Run],
    acc: dict[Path, BenchmarkMetrics],
    open_metrics: dict[Path, dict[str, Any]],
    top_r: Table,
    opts: ReportOptions,
    notes: list[str],
) -> dict[str, Table]:
    """The tables that set our numbers beside the paper's and beside the lab's stored answers."""
    published = load_published(opts.published)
    try:
        lab = load_lab_reference(resolve_data_root(opts.data_root))
    except FileNotFoundError as exc:
        lab = None
        notes.append(f"the lab's stored answers are not compared: {exc}")
    paired, found = paired_tests(selected, opts.bootstrap_samples, opts.seed)
    return {
        t.name: t
        for t in (
            table1_vs_paper(selected, acc, published, lab),
            table2_vs_paper(selected, open_metrics, published),
            table3_vs_paper(found, published),
            fig3_vs_paper(top_r, published),
            paired,
            lab_reference_table(selected, lab, opts.bootstrap_samples, opts.seed),
            departures_table(runs),
        )
    }


def render(
    runs: Sequence[Run],
    tables: dict[str, Table],
    figs: dict[str, Path | None],
    notes: list[str],
    out_dir: Path,
) -> str:
    """The markdown of the whole report."""
    parts = [f"# Report over {len(runs)} run(s)\n"]
    if notes:
        parts.append("## Notes\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    parts.append(tables["runs"].to_markdown())
    parts.append("## Accuracy and open-ended metrics\n")
    parts += [
        tables[n].to_markdown() for n in ("table1_mc_accuracy", "table2_open_ended", "table3_ablations")
    ]
    parts.append("## Tool usage\n")
    parts.append(
        _figure_section("Fig. 2a. Mean calls per tool per question", figs["fig2a"], out_dir, "no traced run")
    )
    parts.append(tables["fig2a_tool_calls"].to_markdown())
    parts.append(
        _figure_section("Fig. 2b. Number of calls per question", figs["fig2b"], out_dir, "no traced run")
    )
    parts.append(tables["fig2b_tool_call_distribution"].to_markdown())
    parts.append("## Evidence context length\n")
    parts.append(
        _figure_section("Fig. 3. Accuracy vs TopR", figs["fig3"], out_dir, "no full run with a TopR")
    )
    parts.append(tables["fig3_top_r"].to_markdown())
    parts.append("## Beside the paper\n")
    parts.append(
        "Published values: conf/published/qa_paper.yaml; Table 3 in accuracy points (full − ablation), Fig. 3 as "
        "accuracy ÷ GPT-4 − 1 (docs/PAPER_CONVENTIONS.md). Δ = ours − published; in CI: whether the published "
        "value lies in our 95 % CI.\n"
    )
    parts += [
        tables[n].to_markdown()
        for n in ("table1_vs_paper", "table2_vs_paper", "table3_vs_paper", "fig3_vs_paper", "paired_tests",
                  "lab_reference", "departures")
    ]  # fmt: skip
    parts.append("## Cost, latency and flips\n")
    parts += [tables[n].to_markdown() for n in ("cost_latency", "cost_by_call", "flips")]
    parts.append("## Evidence by source\n")
    parts += [
        tables[n].to_markdown() for n in ("evidence_by_source", "gold_in_retrieved", "own_evidence_retrieved")
    ]
    parts.append("## Confidence gate: search only when it helps\n")
    parts.append(
        _figure_section("Accuracy vs cost per question", figs["gate_pareto"], out_dir, "no agent=gated run")
    )
    parts.append(tables["gate_sweep"].to_markdown())
    return "\n".join(parts)


def printable(report: Report) -> str:
    """The tables as printed by the pipeline (markdown, without the figure links)."""
    return "\n".join(
        t.to_markdown() for name, t in report.tables.items() if name not in ("runs", "gate_curve")
    )
