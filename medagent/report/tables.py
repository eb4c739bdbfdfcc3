"""The report's tables (the QA paper): Table 1 (multiple-choice accuracy), Table 2 (open-ended metrics), Table 3
(ablations), the TopR sweep behind Fig. 3, cost and latency per run, and standalone -> full flip rates.

Every number comes from predictions and golds through ``medagent.eval`` (the one place that joins them
by id); a table that cannot be built says why in its notes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from medagent.eval import BenchmarkMetrics, TextScorer, question_outcomes, score, score_open_ended
from medagent.llm.usage import UsageRecord
from medagent.report.loader import Run, labels
from medagent.report.published import paper_benchmark
from medagent.report.table import NA, Table, pct
from medagent.report.usage import llm_calls, tool_calls

# Table 3's ablations of the full agent (paper: w/o Tools, w/o Cache & Prune, w/o Evidence Search) and the
# standalone LLM; each is shown as full - ablation in accuracy points, the paper's reading (1.07 = 82.98 - 81.91).
ABLATIONS = ("no_tools", "no_cache_prune", "no_search", "standalone")


def _key_record(run: Run) -> dict[str, Any]:
    k = run.key
    return {
        "benchmark": k.benchmark,
        "llm": k.llm,
        "mode": k.mode,
        "top_r": k.top_r,
        "open_ended": k.open_ended,
    }


def mc_metrics(
    runs: Sequence[Run], bootstrap_samples: int = 1000, seed: int = 0
) -> dict[Path, BenchmarkMetrics]:
    """Accuracy of every multiple-choice run that has golds, by run path."""
    return {
        r.path: score(
            r.predictions, r.golds, benchmark=r.key.benchmark, bootstrap_samples=bootstrap_samples, seed=seed
        )
        for r in runs
        if not r.key.open_ended and r.golds
    }


def table1(selected: Sequence[Run], acc: dict[Path, BenchmarkMetrics]) -> Table:
    """Table 1: accuracy (%) with its 95% bootstrap CI per benchmark x (LLM, agent mode)."""
    t = Table("table1_mc_accuracy", "Table 1. Multiple-choice accuracy (%, 95% bootstrap CI)")
    t.columns = [
        "benchmark",
        "llm",
        "mode",
        "top_r",
        "n",
        "accuracy",
        "95% CI",
        "invalid %",
        "errors %",
        "missing",
    ]
    for r in selected:
        m = acc.get(r.path)
        if m is None:
            continue
        t.records.append({**_key_record(r), **m.to_dict(), "run_dir": str(r.path)})
        t.cells.append([
            r.key.benchmark, r.key.llm, r.key.mode, str(r.key.top_r), str(m.n), pct(m.accuracy),
            f"[{pct(m.ci95[0])}, {pct(m.ci95[1])}]", pct(m.invalid_rate, 1), pct(m.error_rate, 1), str(m.missing),
        ])  # fmt: skip
    if not t.records:
        t.notes.append("no scored multiple-choice run (agent.open_ended=false with golds.jsonl)")
    return t


ScorerFactory = Callable[[], TextScorer]


def open_ended_metrics(
    runs: Sequence[Run],
    scorer_factory: ScorerFactory | None,
    bootstrap_samples: int = 1000,
    seed: int = 0,
) -> tuple[dict[Path, dict[str, Any]], list[str]]:
    """Open-ended metrics per run: ``metrics.json``'s ``open_ended`` entry when present, else computed with
    the scorer (loaded once, on first need); without a scorer the run is named in a note."""
    out: dict[Path, dict[str, Any]] = {}
    notes: list[str] = []
    scorer: TextScorer | None = None
    for r in runs:
        if not r.key.open_ended:
            continue
        stored = (r.metrics or {}).get("open_ended")
        if isinstance(stored, dict) and "metrics" in stored:
            out[r.path] = {**stored, "source": "metrics.json"}
        elif not r.golds:
            notes.append(f"{r.path}: open-ended run without golds.jsonl; not scored")
        elif scorer_factory is None:
            notes.append(
                f"{r.path}: no open-ended metrics in metrics.json and scoring is off (compute_open_ended)"
            )
        else:
            scorer = scorer or scorer_factory()
            result = score_open_ended(
                r.predictions, r.golds, scorer=scorer, bootstrap_samples=bootstrap_samples, seed=seed
            )
            out[r.path] = {**result, "source": "computed"}
    return out, notes


def table2(selected: Sequence[Run], open_metrics: dict[Path, dict[str, Any]]) -> Table:
    """Table 2: open-ended metrics (mean ± SD; cosine per embedder, BERTScore F1) per benchmark x mode."""
    t = Table("table2_open_ended", "Table 2. Open-ended answers: mean ± SD (95% bootstrap CI in the CSV)")
    rows = [(r, open_metrics[r.path]) for r in selected if r.path in open_metrics]
    names: list[str] = []
    for _, m in rows:
        names += [n for n in m["metrics"] if n not in names]
    t.columns = ["benchmark", "llm", "mode", "n", *names, "invalid %", "errors %", "source"]
    for r, m in rows:
        n = m.get("n", 0)
        cells = [r.key.benchmark, r.key.llm, r.key.mode, str(n)]
        for name in names:
            s = m["metrics"].get(name)
            cells.append(NA if s is None else f"{s['mean']:.3f} ± {s.get('sd', 0.0):.3f}")
            if s is not None:
                lo, hi = s.get("ci95", [None, None])
                t.records.append({
                    **_key_record(r), "metric": name, "n": n, "mean": s["mean"], "sd": s.get("sd"),
                    "ci95_lo": lo, "ci95_hi": hi, "invalid": m.get("invalid"), "errors": m.get("errors"),
                    "source": m.get("source"), "run_dir": str(r.path),
                })  # fmt: skip
        cells += [pct(m.get("invalid_rate"), 1), pct(m.get("error_rate"), 1), str(m.get("source", ""))]
        t.cells.append(cells)
    if not rows:
        t.notes.append("no open-ended run (agent.open_ended=true) with metrics")
    return t


def table3(
    selected: Sequence[Run], acc: dict[Path, BenchmarkMetrics], modes: Sequence[str] = ABLATIONS
) -> Table:
    """Table 3: accuracy of the full agent and each ablation, with its difference from full in accuracy
    points (the paper's convention; docs/PAPER_CONVENTIONS.md)."""
    t = Table("table3_ablations", "Table 3. Ablations: accuracy (%) and change vs full (accuracy points)")
    t.columns = ["benchmark", "llm", "full", *modes]
    groups: dict[tuple[str, str], dict[str, Run]] = {}
    for r in selected:
        if r.path in acc:
            groups.setdefault((r.key.benchmark, r.key.llm), {})[r.key.mode] = r
    for (bench, llm), by_mode in sorted(groups.items()):
        if "full" not in by_mode:
            if any(m in by_mode for m in modes):
                t.notes.append(f"{bench} / {llm}: no full run; ablation drops not computed")
            continue
        full = acc[by_mode["full"].path].accuracy
        cells = [bench, llm, pct(full)]
        missing = []
        for mode in modes:
            run = by_mode.get(mode)
            if run is None:
                cells.append(NA)
                missing.append(mode)
                continue
            a = acc[run.path].accuracy
            drop = full - a
            t.records.append({
                "benchmark": bench, "llm": llm, "mode": mode, "accuracy": a, "full_accuracy": full,
                "drop_points": drop, "n": acc[run.path].n, "full_n": acc[by_mode["full"].path].n,
            })  # fmt: skip
            # Shown as the signed change in points (a drop is negative); the CSV keeps the drop itself.
            cells.append(f"{pct(a)} ({-100 * drop:+.2f})")
        t.cells.append(cells)
        if missing:
            t.notes.append(f"{bench} / {llm}: no run for {', '.join(missing)}")
    if not t.cells:
        t.notes.append("no benchmark has both a full run and an ablation run")
    return t


# Table 1's GPT-4 accuracy per benchmark, the reference of the QA paper's Fig. 3 (whose values are the ratio
# accuracy / GPT-4 - 1: Step 2, 86.24 / 81.67 - 1 = +5.60 %). MedQA's is derived from the text (73.29% is "5.58%
# below GPT-4"); MedExpQA has none ("GPT-4 was not available"). conf/published/qa_paper.yaml holds the same.
GPT4_ACCURACY = {"usmle_step1": 0.8067, "usmle_step2": 0.8167, "usmle_step3": 0.8978, "medqa": 0.7887}


def _ratio_cells(ratio: float | None, lo: float | None, hi: float | None) -> list[str]:
    if ratio is None or lo is None or hi is None:
        return [NA, NA]
    return [f"{100 * ratio:+.2f}", f"[{100 * lo:+.2f}, {100 * hi:+.2f}]"]


def top_r_table(
    runs: Sequence[Run],
    acc: dict[Path, BenchmarkMetrics],
    mode: str = "full",
    reference: Mapping[str, float] | None = None,
    reference_name: str = "GPT-4",
) -> Table:
    """The data of Fig. 3: accuracy of the ``mode`` agent at each TopR, per benchmark (and LLM), and as the
    paper plots it, the ratio to ``reference`` (benchmark -> accuracy) minus 1 where the benchmark has one
    (a paper item set, ``usmle_step1_paper``, takes its benchmark's reference)."""
    reference = GPT4_ACCURACY if reference is None else reference
    t = Table(
        "fig3_top_r", f"Fig. 3 data. Accuracy (%) vs TopR ({mode} agent), and ÷ {reference_name} − 1 (%)"
    )
    t.columns = [
        "benchmark",
        "llm",
        "top_r",
        "n",
        "accuracy",
        "95% CI",
        f"÷ {reference_name} − 1",
        "its 95% CI",
    ]
    sweep = sorted(
        (r for r in runs if r.key.mode == mode and r.path in acc and r.key.top_r is not None),
        key=lambda r: (r.key.benchmark, r.key.llm, r.key.top_r or 0),
    )
    for r in sweep:
        m = acc[r.path]
        ref = reference.get(r.key.benchmark, reference.get(paper_benchmark(r.key.benchmark)))
        # The reference is a constant, so the ratio's CI is the accuracy's CI divided by it.
        ratio = [None if not ref else x / ref - 1 for x in (m.accuracy, *m.ci95)]
        t.records.append(
            {**_key_record(r), "n": m.n, "accuracy": m.accuracy, "ci95_lo": m.ci95[0], "ci95_hi": m.ci95[1],
             "reference": ref, "reference_name": reference_name, "vs_reference": ratio[0],
             "vs_reference_lo": ratio[1], "vs_reference_hi": ratio[2]}
        )  # fmt: skip
        t.cells.append([r.key.benchmark, r.key.llm, str(r.key.top_r), str(m.n), pct(m.accuracy),
                        f"[{pct(m.ci95[0])}, {pct(m.ci95[1])}]",
                        *(_ratio_cells(ratio[0], ratio[1], ratio[2]))])  # fmt: skip
    per_bench: dict[tuple[str, str], int] = {}
    for r in sweep:
        per_bench[(r.key.benchmark, r.key.llm)] = per_bench.get((r.key.benchmark, r.key.llm), 0) + 1
    for (bench, llm), n in sorted(per_bench.items()):
        if n < 2:
            t.notes.append(f"{bench} / {llm}: one TopR value only; no sweep to plot")
    if not sweep:
        t.notes.append(f"no multiple-choice {mode} run with agent.retrieval.top_r")
    return t


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def cost_table(runs: Sequence[Run]) -> Table:
    """Cost and latency per run: mean tokens, LLM calls, tool calls and wall time per question."""
    t = Table("cost_latency", "Cost and latency per question (means over answered questions)")
    t.columns = [
        "run",
        "n",
        "prompt tok",
        "evaluated tok",
        "completion tok",
        "LLM calls",
        "tool calls",
        "wall s",
        "total wall s",
    ]
    names = labels(runs)
    for r in runs:
        preds = r.predictions
        usages = [UsageRecord.from_dict(p.usage) for p in preds]
        rec = {
            **_key_record(r),
            "n": len(preds),
            "errors": sum(p.error is not None for p in preds),
            "prompt_tokens": _mean([u.prompt_tokens for u in usages]),
            "evaluated_tokens": _mean([u.evaluated_tokens for u in usages]),
            "completion_tokens": _mean([u.completion_tokens for u in usages]),
            "llm_calls": _mean([llm_calls(p) for p in preds]),
            "tool_calls": _mean([float(sum(tool_calls(p).values())) if u.tool_calls is None
                                 else float(u.tool_calls) for p, u in zip(preds, usages, strict=True)]),
            "latency_s": _mean([p.latency_s for p in preds]),
            "total_latency_s": sum(p.latency_s for p in preds),
            "run_dir": str(r.path),
        }  # fmt: skip
        t.records.append(rec)

        def f(x: float | None, d: int = 1) -> str:
            return NA if x is None else f"{x:.{d}f}"

        t.cells.append([
            names[r.path], str(rec["n"]), f(rec["prompt_tokens"]), f(rec["evaluated_tokens"]), f(rec["completion_tokens"]),
            f(rec["llm_calls"], 2), f(rec["tool_calls"], 2), f(rec["latency_s"], 2), f(rec["total_latency_s"], 1),
        ])  # fmt: skip
    if not runs:
        t.notes.append("no runs")
    return t


def _ratio(k: int, n: int) -> float | None:
    return k / n if n else None


def flip_table(selected: Sequence[Run], baseline: str = "standalone", treatment: str = "full") -> Table:
    """Answers that flip between two modes on the same benchmark (and LLM), on their common question ids."""
    t = Table("flips", f"Flips from {baseline} to {treatment} (same benchmark, LLM and question ids)")
    t.columns = ["benchmark", "llm", "n common", f"{baseline} acc", f"{treatment} acc",
                 "right→wrong", "wrong→right", "right→wrong / right", "wrong→right / wrong"]  # fmt: skip
    groups: dict[tuple[str, str], dict[str, Run]] = {}
    for r in selected:
        if not r.key.open_ended and r.golds:
            groups.setdefault((r.key.benchmark, r.key.llm), {})[r.key.mode] = r
    for (bench, llm), by_mode in sorted(groups.items()):
        absent = [m for m in (baseline, treatment) if m not in by_mode]
        if absent:
            if len(absent) == 1:
                t.notes.append(f"{bench} / {llm}: no {absent[0]} run; flip rates not computed")
            continue
        a = question_outcomes(by_mode[baseline].predictions, by_mode[baseline].golds)
        b = question_outcomes(by_mode[treatment].predictions, by_mode[treatment].golds)
        common = sorted(set(a) & set(b))
        n = len(common)
        rw = sum(a[i] == 1 and b[i] == 0 for i in common)
        wr = sum(a[i] == 0 and b[i] == 1 for i in common)
        right = sum(a[i] for i in common)
        treated = sum(b[i] for i in common)
        rates = {
            "right_to_wrong_rate": _ratio(rw, n),
            "wrong_to_right_rate": _ratio(wr, n),
            "right_to_wrong_given_right": _ratio(rw, right),
            "wrong_to_right_given_wrong": _ratio(wr, n - right),
        }
        t.records.append({
            "benchmark": bench, "llm": llm, "baseline": baseline, "treatment": treatment, "n_common": n,
            "baseline_correct": right, "treatment_correct": treated, "right_to_wrong": rw, "wrong_to_right": wr,
            **rates,
        })  # fmt: skip
        t.cells.append([
            bench, llm, str(n), pct(_ratio(right, n)), pct(_ratio(treated, n)),
            f"{rw} ({pct(rates['right_to_wrong_rate'], 1)}%)", f"{wr} ({pct(rates['wrong_to_right_rate'], 1)}%)",
            pct(rates["right_to_wrong_given_right"], 1), pct(rates["wrong_to_right_given_wrong"], 1),
        ])  # fmt: skip
        if n == 0:
            t.notes.append(f"{bench} / {llm}: the two runs share no question id")
    if not t.records and not t.notes:
        t.notes.append(f"no benchmark has both a {baseline} and a {treatment} multiple-choice run")
    return t
