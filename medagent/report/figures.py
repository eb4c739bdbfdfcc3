"""The report's figures (the QA paper): Fig. 2a tool calls per question, Fig. 2b call-count distribution, Fig. 3
accuracy vs TopR; and the confidence gate's accuracy-cost Pareto figure (issue 18). Each is drawn from its table's records with matplotlib's Agg backend (no display), and
returns None when its table is empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medagent.report.table import Table
from medagent.report.usage import BINS


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # before pyplot is imported: reports run on headless machines
    import matplotlib.pyplot as plt

    return plt


def _unique(values: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def _save(plt: Any, fig: Any, path: Path) -> Path:
    """Every figure ends the same way: tight layout, 150 dpi PNG, figure closed (no pyplot state leaks)."""
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def fig2a(table: Table, path: Path) -> Path | None:
    """Grouped bars: mean calls per question of each tool, one bar per run (benchmark)."""
    if not table.records:
        return None
    plt = _pyplot()
    tools = _unique([r["tool"] for r in table.records])
    runs = _unique([r["label"] for r in table.records])
    mean = {(r["label"], r["tool"]): r["mean_calls"] for r in table.records}
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(tools)), 4.0))
    for i, run in enumerate(runs):
        xs = [j + (i - (len(runs) - 1) / 2) * width for j in range(len(tools))]
        ax.bar(xs, [mean.get((run, t), 0.0) for t in tools], width, label=run)
    ax.set_xticks(range(len(tools)), tools, rotation=20, ha="right")
    ax.set_ylabel("mean calls per question")
    ax.set_title("Tool usage per question")
    ax.legend(fontsize="small")
    return _save(plt, fig, path)


def fig2b(table: Table, path: Path) -> Path | None:
    """One panel per tool: stacked shares of questions by number of calls (1..8, >8), one bar per run."""
    if not table.records:
        return None
    plt = _pyplot()
    tools = _unique([r["tool"] for r in table.records])
    runs = _unique([r["label"] for r in table.records])
    rec = {(r["label"], r["tool"]): r for r in table.records}
    fig, axes = plt.subplots(1, len(tools), figsize=(3.6 * len(tools), 4.0), sharey=True, squeeze=False)
    colors = plt.get_cmap("viridis")([i / max(1, len(BINS) - 1) for i in range(len(BINS))])
    for ax, tool in zip(axes[0], tools, strict=True):
        bottom = [0.0] * len(runs)
        for b, color in zip(BINS, colors, strict=True):
            shares = [rec[(run, tool)][f"share_{b}"] if (run, tool) in rec else 0.0 for run in runs]
            ax.bar(range(len(runs)), shares, bottom=bottom, color=color, label=b)
            bottom = [x + y for x, y in zip(bottom, shares, strict=True)]
        ax.set_xticks(range(len(runs)), runs, rotation=30, ha="right", fontsize="small")
        ax.set_title(tool, fontsize="medium")
    axes[0][0].set_ylabel("share of questions calling the tool")
    axes[0][-1].legend(title="calls", fontsize="x-small", bbox_to_anchor=(1.02, 1), loc="upper left")
    fig.suptitle("Number of calls per question")
    return _save(plt, fig, path)


def fig3(table: Table, path: Path) -> Path | None:
    """Accuracy vs TopR per benchmark (and LLM), log2 x axis, 95% CI error bars: as the QA paper plots it, the
    ratio to the reference (Table 1's GPT-4) minus 1 where a benchmark has one, with absolute accuracy beside
    it."""
    if not table.records:
        return None
    plt = _pyplot()
    series: dict[str, list[dict[str, Any]]] = {}
    llms = {r["llm"] for r in table.records}
    for r in table.records:
        name = r["benchmark"] if len(llms) == 1 else f"{r['benchmark']} / {r['llm']}"
        series.setdefault(name, []).append(r)
    relative = any(r.get("vs_reference") is not None for r in table.records)
    fig, axes = plt.subplots(1, 2 if relative else 1, figsize=(11.0 if relative else 6.0, 4.0), squeeze=False)
    panels = [("accuracy", axes[0][-1])] + ([("vs_reference", axes[0][0])] if relative else [])
    for key, ax in panels:
        for name, points in series.items():
            points = sorted((p for p in points if p.get(key) is not None), key=lambda r: r["top_r"])
            if not points:
                continue
            xs = [p["top_r"] for p in points]
            ys = [100 * p[key] for p in points]
            lo, hi = ("ci95_lo", "ci95_hi") if key == "accuracy" else ("vs_reference_lo", "vs_reference_hi")
            err = [[100 * (p[key] - p[lo]) for p in points], [100 * (p[hi] - p[key]) for p in points]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=name)
        ax.set_xscale("log", base=2)
        top_rs = sorted({r["top_r"] for r in table.records})
        ax.set_xticks(top_rs, [str(x) for x in top_rs])
        ax.set_xlabel("TopR (reranked documents reviewed)")
        ax.legend(fontsize="small")
    ref = next((r.get("reference_name") for r in table.records if r.get("reference_name")), "reference")
    axes[0][-1].set_ylabel("accuracy (%)")
    axes[0][-1].set_title("Accuracy vs TopR")
    if relative:
        axes[0][0].axhline(0.0, color="grey", linewidth=0.8)
        axes[0][0].set_ylabel(f"accuracy / {ref} - 1 (%)")
        axes[0][0].set_title(f"Relative to {ref} (the QA paper's Fig. 3)")
    return _save(plt, fig, path)


# The gate figure's cost axes: (record field, axis label).
GATE_COSTS = (
    ("llm_calls", "LLM calls per question"),
    ("tokens", "tokens per question"),
    ("wall_s", "wall s per question"),
)


def gate_pareto(curve: Table, path: Path, marked: Sequence[float] = ()) -> Path | None:
    """Accuracy vs cost, one panel per cost: the gated agent's curve over every threshold, standalone and
    full as points with their 95% CI, the ``marked`` thresholds labelled; one colour per run."""
    if not curve.records:
        return None
    plt = _pyplot()
    from matplotlib import ticker

    labels = _unique([r["label"] for r in curve.records])
    fig, axes = plt.subplots(1, len(GATE_COSTS), figsize=(4.2 * len(GATE_COSTS), 4.0), squeeze=False)
    colors = plt.get_cmap("tab10")
    for ax, (key, xlabel) in zip(axes[0], GATE_COSTS, strict=True):
        for i, label in enumerate(labels):
            rows = [r for r in curve.records if r["label"] == label and r[key] is not None]
            gated = sorted((r for r in rows if r["arm"] == "gated"), key=lambda r: r[key])
            c = colors(i % 10)
            ax.plot([r[key] for r in gated], [100 * r["accuracy"] for r in gated], "-", color=c, alpha=0.7,
                    marker=".", label=f"gated ({label})" if len(labels) > 1 else "gated (each threshold)")  # fmt: skip
            # One label per point: thresholds that give the same arm share it ("0.45-0.9").
            points: dict[tuple[float, float], list[float]] = {}
            for r in gated:
                if r["threshold"] in marked:
                    points.setdefault((r[key], 100 * r["accuracy"]), []).append(r["threshold"])
            for xy, ts in points.items():
                text = f"{min(ts):g}" if len(ts) == 1 else f"{min(ts):g}-{max(ts):g}"
                ax.annotate(text, xy, fontsize="x-small", textcoords="offset points", xytext=(3, 3), color=c)
            for arm, marker in (("standalone", "s"), ("full", "^")):
                for r in (r for r in rows if r["arm"] == arm):
                    y = 100 * r["accuracy"]
                    err = [[y - 100 * r["ci95_lo"]], [100 * r["ci95_hi"] - y]]
                    ax.errorbar([r[key]], [y], yerr=err, fmt=marker, color=c, capsize=3,
                                label=arm if i == 0 else None)  # fmt: skip
        ax.set_xscale("log")
        # Plain numbers on a log axis: the default 2x10^2-style minor labels overlap.
        ax.xaxis.set_major_formatter(ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel(xlabel)
        ax.set_ylabel("accuracy (%)")
    axes[0][0].legend(fontsize="small")
    fig.suptitle("Confidence gate: accuracy vs cost (one run, every threshold)")
    return _save(plt, fig, path)
