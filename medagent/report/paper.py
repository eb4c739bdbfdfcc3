"""Every number beside the QA paper's: published value, ours with its 95 % CI, the difference, and whether the
published value lies in our CI (Tables 1-3, Fig. 3); paired tests between the agent's arms; our runs beside
the lab's own stored answers on the same items; the departures each run recorded.

Conventions (docs/PAPER_CONVENTIONS.md): Table 3 is full minus ablation in accuracy points; Fig. 3 is the
agent's accuracy as a ratio to GPT-4's, minus 1. Paired tests are exact McNemar tests on the questions two
runs share, Holm-corrected over every comparison in the report; each difference has a paired bootstrap CI.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scipy.stats import binomtest

from medagent.eval import BenchmarkMetrics, question_outcomes
from medagent.eval.stats import bootstrap_ci
from medagent.report.loader import HELD_OUT, Run
from medagent.report.published import LabReference, Published, by_item, paper_benchmark
from medagent.report.table import NA, Table, pct

# The comparisons of the paired-test table: (baseline, treatment); the difference is treatment - baseline.
# Table 3's ablations (the paper's "w/o" rows).
TABLE3_ABLATIONS = ("no_tools", "no_cache_prune", "no_search")
# (baseline, treatment). The last two: what searching gives when each question's own articles are held out
# of the index, and what those articles add (issue #35, item 7).
PAIRS = (*((a, "full") for a in TABLE3_ABLATIONS), ("standalone", "full"), ("standalone", f"full{HELD_OUT}"),
         (f"full{HELD_OUT}", "full"))  # fmt: skip


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (1.0 when there are none)."""
    return 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order (monotone, capped at 1)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    out = [0.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        out[i] = running
    return out


def _f(x: float | None, digits: int = 2, sign: bool = False) -> str:
    if x is None:
        return NA
    v = round(100 * x, digits) + 0.0  # + 0.0: a rounded -0.00 prints as 0.00
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def _inside(value: float | None, lo: float, hi: float) -> str:
    return NA if value is None else ("yes" if lo - 1e-9 <= value <= hi + 1e-9 else "no")


@dataclass(frozen=True)
class Paired:
    """Two runs compared on the questions both answered: b = right only in the baseline, c = only in the
    treatment; ``diff`` = treatment - baseline accuracy with its paired bootstrap CI."""

    n: int
    baseline: float
    treatment: float
    b: int
    c: int
    diff: float
    ci95: tuple[float, float]
    p: float


def paired(a: dict[str, int], t: dict[str, int], samples: int = 1000, seed: int = 0) -> Paired | None:
    """Compares per-question outcomes (id -> 1/0) of a baseline and a treatment; None without shared ids."""
    common = sorted(set(a) & set(t))
    if not common:
        return None
    diffs = [t[i] - a[i] for i in common]
    b = sum(d < 0 for d in diffs)
    c = sum(d > 0 for d in diffs)
    n = len(common)
    return Paired(n, sum(a[i] for i in common) / n, sum(t[i] for i in common) / n, b, c, sum(diffs) / n,
                  bootstrap_ci(diffs, samples, seed), mcnemar_exact(b, c))  # fmt: skip


def _by_mode(selected: Sequence[Run]) -> dict[tuple[str, str], dict[str, Run]]:
    groups: dict[tuple[str, str], dict[str, Run]] = {}
    for r in selected:
        if not r.key.open_ended and r.golds:
            groups.setdefault((r.key.benchmark, r.key.llm), {})[r.key.mode] = r
    return groups


def lab_bare_72b(benchmark: str, pub: Published, lab: LabReference | None) -> float | None:
    """The lab's own bare Qwen2.5-72B-Instruct accuracy on ``benchmark`` (the second reference), if stored."""
    name = paper_benchmark(benchmark)
    if name == "medexpqa":
        v = pub.lab_medexpqa.get("Qwen2.5-72B-Instruct")
        return None if v is None else v / 100
    if lab is None or not name.startswith("usmle_step"):
        return None
    found = lab.accuracy.get(("Qwen2.5-72B-Instruct", int(name[-1])))
    return None if found is None else found[2] / 100


def table1_vs_paper(
    selected: Sequence[Run],
    acc: dict[Path, BenchmarkMetrics],
    pub: Published,
    lab: LabReference | None = None,
) -> Table:
    """Table 1 beside the paper: our accuracy with its CI, the published one, Δ (points), in our CI, and the
    lab's own bare Qwen2.5-72B on the same items as a second reference."""
    t = Table("table1_vs_paper", "Table 1 beside the paper: accuracy (%), Δ = ours − published (points)")
    t.columns = ["benchmark", "llm", "mode", "paper row", "n", "ours", "95% CI", "published", "Δ", "in CI",
                 "lab bare 72B"]  # fmt: skip
    for r in selected:
        m, row = acc.get(r.path), pub.row_of(r.key.mode, r.key.llm)
        if m is None or row is None:
            continue
        want = pub.accuracy(row, r.key.benchmark)
        delta = None if want is None else m.accuracy - want
        inside = _inside(want, *m.ci95)
        bare = lab_bare_72b(r.key.benchmark, pub, lab)
        t.records.append({"benchmark": r.key.benchmark, "llm": r.key.llm, "mode": r.key.mode, "paper_row": row,
                          "n": m.n, "accuracy": m.accuracy, "ci95_lo": m.ci95[0], "ci95_hi": m.ci95[1],
                          "published": want, "delta": delta, "published_in_ci": inside,
                          "lab_bare_72b": bare})  # fmt: skip
        t.cells.append([r.key.benchmark, r.key.llm, r.key.mode, row, str(m.n), pct(m.accuracy),
                        f"[{pct(m.ci95[0])}, {pct(m.ci95[1])}]", _f(want), _f(delta, sign=True), inside,
                        _f(bare)])  # fmt: skip
    if not t.records:
        t.notes.append("no full run (nor a standalone run of a published model) with golds")
    return t


def table2_vs_paper(selected: Sequence[Run], open_metrics: dict[Path, dict], pub: Published) -> Table:
    """Table 2 beside the paper: each open-ended metric of the full agent, its CI, the published mean."""
    t = Table("table2_vs_paper", "Table 2 beside the paper: open-ended similarity, Δ = ours − published")
    t.columns = ["benchmark", "llm", "metric", "n", "ours", "95% CI", "published", "Δ", "in CI"]
    for r in selected:
        m = open_metrics.get(r.path)
        if m is None or r.key.mode != "full":
            continue
        for name, s in m["metrics"].items():
            want = pub.open_ended(name, r.key.benchmark)
            lo, hi = s.get("ci95", [s["mean"], s["mean"]])
            delta = None if want is None else s["mean"] - want
            inside = _inside(want, lo, hi)
            t.records.append({"benchmark": r.key.benchmark, "llm": r.key.llm, "metric": name, "n": m.get("n"),
                              "mean": s["mean"], "ci95_lo": lo, "ci95_hi": hi, "published": want,
                              "delta": delta, "published_in_ci": inside})  # fmt: skip
            t.cells.append([r.key.benchmark, r.key.llm, name, str(m.get("n")), f"{s['mean']:.3f}",
                            f"[{lo:.3f}, {hi:.3f}]", NA if want is None else f"{want:.2f}",
                            NA if delta is None else f"{delta:+.3f}", inside])  # fmt: skip
    if not t.records:
        t.notes.append("no open-ended full run with metrics")
    t.notes.append("the paper's columns are SFR-Embedding-2_R, gte-Qwen2-7B-instruct and bertscore_f1 "
                   "(scoring=gpu); other scorers have no published value")  # fmt: skip
    return t


def paired_tests(
    selected: Sequence[Run], samples: int = 1000, seed: int = 0, pairs: Sequence[tuple[str, str]] = PAIRS
) -> tuple[Table, dict[tuple[str, str, str, str], Paired]]:
    """Exact McNemar tests, full vs each ablation and standalone vs full, per benchmark and LLM, with the
    paired bootstrap CI of the difference and Holm-adjusted p-values over every row."""
    t = Table("paired_tests", "Paired tests: Δ = treatment − baseline (points), exact McNemar, Holm-adjusted")
    t.columns = ["benchmark", "llm", "baseline", "treatment", "n common", "b (base only)", "c (treat only)",
                 "Δ", "95% CI", "p", "p (Holm)"]  # fmt: skip
    found: dict[tuple[str, str, str, str], Paired] = {}
    for (bench, llm), by_mode in sorted(_by_mode(selected).items()):
        for base, treat in pairs:
            if base in by_mode and treat in by_mode:
                a = question_outcomes(by_mode[base].predictions, by_mode[base].golds)
                b = question_outcomes(by_mode[treat].predictions, by_mode[treat].golds)
                res = paired(a, b, samples, seed)
                if res is not None:
                    found[(bench, llm, base, treat)] = res
    adjusted = holm([p.p for p in found.values()])
    for ((bench, llm, base, treat), p), p_holm in zip(found.items(), adjusted, strict=True):
        t.records.append({"benchmark": bench, "llm": llm, "baseline": base, "treatment": treat, "n": p.n,
                          "baseline_accuracy": p.baseline, "treatment_accuracy": p.treatment, "b": p.b, "c": p.c,
                          "difference": p.diff, "ci95_lo": p.ci95[0], "ci95_hi": p.ci95[1], "p": p.p,
                          "p_holm": p_holm})  # fmt: skip
        t.cells.append([bench, llm, base, treat, str(p.n), str(p.b), str(p.c), _f(p.diff, sign=True),
                        f"[{_f(p.ci95[0], sign=True)}, {_f(p.ci95[1], sign=True)}]", f"{p.p:.3g}",
                        f"{p_holm:.3g}"])  # fmt: skip
    if not found:
        t.notes.append("no benchmark has the full run and a compared arm on shared questions")
    else:
        t.notes.append(f"Holm over {len(found)} comparisons")
    return t, found


def table3_vs_paper(found: dict[tuple[str, str, str, str], Paired], pub: Published) -> Table:
    """Table 3 beside the paper: full − ablation in accuracy points, paired CI, published, in CI."""
    t = Table("table3_vs_paper", "Table 3 beside the paper: full − ablation (accuracy points)")
    t.columns = ["benchmark", "llm", "ablation", "n common", "ours", "95% CI", "published", "Δ", "in CI"]
    for (bench, llm, base, treat), p in found.items():
        if treat != "full" or base not in TABLE3_ABLATIONS:
            continue
        drop, lo, hi = p.diff, p.ci95[0], p.ci95[1]  # full - ablation
        want = pub.drop(base, bench)
        delta = None if want is None else drop - want
        inside = _inside(want, lo, hi)
        t.records.append({"benchmark": bench, "llm": llm, "ablation": base, "n": p.n, "difference": drop,
                          "ci95_lo": lo, "ci95_hi": hi, "published": want, "delta": delta,
                          "published_in_ci": inside})  # fmt: skip
        t.cells.append([bench, llm, base, str(p.n), _f(drop, sign=True), f"[{_f(lo, sign=True)}, {_f(hi, sign=True)}]",
                        _f(want, sign=True), _f(delta, sign=True), inside])  # fmt: skip
    if not t.records:
        t.notes.append("no full run beside an ablation on shared questions")
    return t


def fig3_vs_paper(top_r: Table, pub: Published) -> Table:
    """Fig. 3 beside the paper: accuracy / GPT-4's − 1 (%) at each TopR the text states."""
    t = Table("fig3_vs_paper", "Fig. 3 beside the paper: accuracy ÷ GPT-4 − 1 (%), Δ = ours − published")
    t.columns = ["benchmark", "llm", "top_r", "n", "ours", "95% CI", "published", "Δ", "in CI"]
    for r in top_r.records:
        if r.get("vs_reference") is None:
            continue
        want = pub.ratio(r["benchmark"], r["top_r"])
        ours, lo, hi = r["vs_reference"], r["vs_reference_lo"], r["vs_reference_hi"]
        delta = None if want is None else ours - want
        inside = _inside(want, lo, hi)
        t.records.append({**{k: r[k] for k in ("benchmark", "llm", "top_r", "n")}, "ratio": ours, "ci95_lo": lo,
                          "ci95_hi": hi, "published": want, "delta": delta, "published_in_ci": inside})  # fmt: skip
        t.cells.append([r["benchmark"], r["llm"], str(r["top_r"]), str(r["n"]), _f(ours, sign=True),
                        f"[{_f(lo, sign=True)}, {_f(hi, sign=True)}]", _f(want, sign=True), _f(delta, sign=True),
                        inside])  # fmt: skip
    if not t.records:
        t.notes.append("no full run on a benchmark with a GPT-4 value")
    return t


def lab_reference_table(
    selected: Sequence[Run],
    ref: LabReference | None,
    samples: int = 1000,
    seed: int = 0,
    modes: Sequence[str] = ("standalone", "full"),
) -> Table:
    """Our multiple-choice runs (of ``modes``) on the paper's USMLE items beside the lab's stored Qwen2.5
    answers, item by item: b = right only in the lab's answers, c = right only in ours, exact McNemar."""
    t = Table("lab_reference", "Beside the lab's stored Qwen2.5-Instruct answers (same items, paired)")
    t.columns = ["benchmark", "llm", "mode", "lab model", "n common", "lab", "ours", "b (lab only)",
                 "c (ours only)", "Δ", "95% CI", "p"]  # fmt: skip
    if ref is None:
        t.notes.append("usmle_paper/reference_*.{csv,json} not in the data root")
        return t
    for r in selected:
        if r.key.open_ended or not r.golds or r.key.mode not in modes:
            continue
        ours = by_item(question_outcomes(r.predictions, r.golds))
        for model in ref.models():
            lab = ref.outcomes(model, r.key.benchmark)
            res = paired(
                {str(i): v for i, v in lab.items()}, {str(i): v for i, v in ours.items()}, samples, seed
            )
            if not lab or res is None:
                continue
            t.records.append({"benchmark": r.key.benchmark, "llm": r.key.llm, "mode": r.key.mode, "lab_model": model,
                              "n": res.n, "lab_accuracy": res.baseline, "accuracy": res.treatment, "b": res.b,
                              "c": res.c, "difference": res.diff, "ci95_lo": res.ci95[0], "ci95_hi": res.ci95[1],
                              "p": res.p})  # fmt: skip
            t.cells.append([r.key.benchmark, r.key.llm, r.key.mode, model, str(res.n), pct(res.baseline),
                            pct(res.treatment), str(res.b), str(res.c), _f(res.diff, sign=True),
                            f"[{_f(res.ci95[0], sign=True)}, {_f(res.ci95[1], sign=True)}]", f"{res.p:.3g}"])  # fmt: skip
    if not t.records:
        t.notes.append(
            "no multiple-choice run on usmle_step{1,2,3}_paper (only those carry the lab's item ids)"
        )
    return t


def departures_table(runs: Sequence[Run]) -> Table:
    """Each run's recorded departures from the paper's method (``manifest.json`` ``departures``)."""
    t = Table("departures", "Departures from the paper's method, as each run recorded them")
    t.columns = ["benchmark", "llm", "mode", "departures"]
    for r in runs:
        found = r.departures
        text = "not recorded" if found is None else ("none" if not found else "; ".join(found))
        t.records.append({"benchmark": r.key.benchmark, "llm": r.key.llm, "mode": r.key.mode,
                          "departures": found, "run_dir": str(r.path)})  # fmt: skip
        t.cells.append([r.key.benchmark, r.key.llm, r.key.mode, text])
    return t
