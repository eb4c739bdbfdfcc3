"""Files of a network analysis: CSV tables, PNG figures, ``summary.json`` and ``report.md``.

This module owns the names of those files inside an output directory (``tables/``, ``figures/``). The
report puts every convention next to the result it shapes, and the paper's numbers beside ours.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from medagent.network.analysis import NetworkAnalysis
from medagent.network.figures import FIGURES
from medagent.network.markov import order_choices

TABLES = "tables"
FIGS = "figures"
REPORT = "report.md"
SUMMARY = "summary.json"

# The history-taking paper's reported numbers, shown beside ours.
PAPER = {
    "Q": 0.70,
    "modules": 8,
    "nodf_z": -6.4,
    "cv_order0": 0.238,
    "cv_order1": 0.406,
    "rho_weights": 0.94,
    "rho_order": 0.08,
}


def _clean(v: Any) -> Any:
    if isinstance(v, float | np.floating):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def _write_csv(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    rows = list(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        if rows:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return path


def modularity_null_dict(a: NetworkAnalysis) -> dict[str, Any] | None:
    """The significance of the binary Q_B: null summary, ``p`` (= ``p_greater``) and how the nulls were made."""
    q, cfg = a.modularity_null, a.config
    if q is None:
        return None
    return {
        **q.to_dict(),
        "p": q.p_greater,
        "seed": cfg.seed,
        "restarts": cfg.modularity_restarts,
        "batch_size": cfg.modularity_null_batch_size,
    }


def tables(a: NetworkAnalysis) -> dict[str, list[dict[str, Any]]]:
    """Every table of the report as rows (file name -> rows)."""
    inc, svn, net = a.incidence, a.svn, a.network
    pairs = [
        {
            "finding": f,
            "diagnosis": d,
            "N": svn.N,
            "N_f": int(svn.N_f[i]),
            "N_d": int(svn.N_d[j]),
            "N_fd": int(svn.N_fd[i, j]),
            "p_over": float(svn.p_over[i, j]),
            "p_under": float(svn.p_under[i, j]),
            "p_bh": float(svn.p_bh[i, j]),
            f"bonferroni_{svn.alpha}": bool(svn.bonferroni[i, j]),
            f"bh_{svn.alpha}": bool(svn.bh[i, j]),
        }
        for i, f in enumerate(inc.findings)
        for j, d in enumerate(inc.diagnoses)
        if svn.N_fd[i, j] > 0
    ]
    modules = []
    for part_name, part in (("binary", a.modules_binary), ("weighted", a.modules_weighted)):
        if part is None:
            continue
        modules += [
            {"partition": part_name, "node": n, "level": "row", "module": m}
            for n, m in zip(net.findings, part.row_labels, strict=True)
        ]
        modules += [
            {"partition": part_name, "node": n, "level": "col", "module": m}
            for n, m in zip(net.diagnoses, part.col_labels, strict=True)
        ]
    out: dict[str, list[dict[str, Any]]] = {
        "svn_links.csv": pairs,
        "findings.csv": a.finding_table,
        "diagnoses.csv": a.diagnosis_table,
        "modules.csv": modules,
        "modularity_null.csv": [d] if (d := modularity_null_dict(a)) else [],
        "modularity_null_samples.csv": (
            [{"model": a.modularity_null.model, "Q": float(x)} for x in a.modularity_null.samples]
            if a.modularity_null
            else []
        ),
        "nodf_nulls.csv": [s.to_dict() for s in a.nulls.values()],
        "nodf_null_samples.csv": [
            {"model": m, "nodf": float(x)} for m, s in a.nulls.items() for x in s.samples
        ],
        "flow_edges.csv": [{"from": u, "to": v, **d} for u, v, d in a.flow.edges(data=True)],
        "category_positions.csv": [
            {
                "category": c,
                "share": a.shares[c],
                "mean_position": a.positions[c],
                "phase": a.phases.phase.get(c),
                "share_early": a.phases.share_early.get(c),
                "share_late": a.phases.share_late.get(c),
            }
            for c in a.shares
        ],
        "validation.csv": [
            {
                "comparison": k,
                "rho": r.rho,
                "p_t": r.p_t,
                "p_exact": r.p_exact,
                "n": r.n,
                "left_out": ";".join(r.left_out),
            }
            for k, r in {**a.validation, **a.hubs_vs_information}.items()
        ],
    }
    out["sensitivity.csv"] = a.sensitivity
    out["markov_both.csv"] = markov_rows(a)
    if a.markov is not None:
        out["markov_orders.csv"] = [asdict(f) for f in a.markov.fits]
    if a.cv is not None:
        out["cv_accuracy.csv"] = [
            {"order": k, "accuracy": v, "n_targets": a.cv.n_targets, "backoffs": a.cv.backoffs[k]}
            for k, v in a.cv.accuracy.items()
        ]
    return out


def markov_rows(a: NetworkAnalysis) -> list[dict[str, Any]]:
    """Order fits and CV accuracy under each self-loop convention, one row per (convention, order)."""
    rows = []
    for policy, sel in a.markov_by_loops.items():
        cv = a.cv_by_loops.get(policy)
        for f in sel.fits if sel else []:
            rows.append(
                {
                    "self_loops": policy,
                    "order": f.order,
                    "n_targets": sel.n,  # type: ignore[union-attr]
                    "loglik": f.loglik,
                    "npar_full": f.npar_full,
                    "npar_observed": f.npar_observed,
                    "aic_full": f.aic_full,
                    "bic_full": f.bic_full,
                    "aic_observed": f.aic_observed,
                    "bic_observed": f.bic_observed,
                    "cv_accuracy": cv.accuracy.get(f.order) if cv else None,
                }
            )
    return rows


def summary(a: NetworkAnalysis) -> dict[str, Any]:
    """Headline numbers (ours and the paper's) as JSON-ready data."""
    net = a.network
    s: dict[str, Any] = {
        "n_interviews": a.n_interviews,
        "n_findings": len(a.incidence.findings),
        "n_diagnoses": len(a.incidence.diagnoses),
        "n_tests": a.svn.n_tests,
        "links_bonferroni": int(a.svn.bonferroni.sum()),
        "links_bh": int(a.svn.bh.sum()),
        "network": {"links": net.n_links, "findings": len(net.findings), "diagnoses": len(net.diagnoses)},
        "modularity": {
            k: ({"Q": p.Q, "modules": p.modules, "hits": p.hits, "restarts": p.restarts} if p else None)
            for k, p in (("binary", a.modules_binary), ("weighted", a.modules_weighted))
        },
        "modularity_null": modularity_null_dict(a),
        "nodf": a.nodf_obs.to_dict() if a.nodf_obs else None,
        "nulls": {m: s.to_dict() for m, s in a.nulls.items()},
        "mutual_information_nats": a.mutual_information_nats,
        "markov_selected": a.markov.selected if a.markov else None,
        "cv_accuracy": a.cv.accuracy if a.cv else None,
        "phases": {"tau": a.phases.tau, "phase": a.phases.phase},
        "validation": {
            k: {"rho": r.rho, "p_t": r.p_t, "p_exact": r.p_exact, "n": r.n} for k, r in a.validation.items()
        },
        "hubs_vs_information": {
            k: {"rho": r.rho, "p_t": r.p_t, "n": r.n} for k, r in a.hubs_vs_information.items()
        },
        "kl_null": a.kl_null.to_dict() if a.kl_null else None,
        "markov_by_loops": {
            k: {
                "selected": m.selected if m else None,
                "cv_accuracy": (c.accuracy if (c := a.cv_by_loops.get(k)) else None),
            }
            for k, m in a.markov_by_loops.items()
        },
        "sensitivity": a.sensitivity,
        "paper": PAPER,
        "conventions": a.conventions,
        "notes": a.notes,
    }
    return _clean(s)  # type: ignore[no-any-return]


def _fmt(x: Any, nd: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return "NaN" if not math.isfinite(x) else f"{x:.{nd}f}"
    return str(x)


def markdown(a: NetworkAnalysis, figures: dict[str, Path | None]) -> str:
    """The report: each result with its convention and the paper's number."""
    s, cv = a.conventions, a.cv
    pb = a.modules_binary
    lines = [
        "# Network analysis of clinical interviews (the history-taking paper)",
        "",
        f"{a.n_interviews} interviews; {len(a.incidence.findings)} positive findings; {len(a.incidence.diagnoses)} diagnoses. "
        f"Conventions: {s['interviews']}; {s['findings']}.",
        "",
        "## Knowledge network G_B",
        f"- Validated links: Bonferroni {int(a.svn.bonferroni.sum())}, BH {int(a.svn.bh.sum())} of N_t = {a.svn.n_tests} tests. *{s['svn']}.*",
        f"- G_B: {a.network.n_links} links, {len(a.network.findings)} findings x {len(a.network.diagnoses)} diagnoses "
        f"({a.network.dropped_findings} findings and {a.network.dropped_diagnoses} diagnoses isolated and dropped). *{s['network']}.*",
        f"- Barber modularity: Q_B = {_fmt(pb.Q if pb else None)} with {pb.modules if pb else 'n/a'} modules "
        f"(weighted: {_fmt(a.modules_weighted.Q if a.modules_weighted else None)}, {a.modules_weighted.modules if a.modules_weighted else 'n/a'} modules); "
        f"paper: Q = {PAPER['Q']}, {PAPER['modules']} modules. *{s['modularity']}.*",
    ]
    if (qn := a.modularity_null) is not None:
        lines.append(
            f"- Significance of Q_B: null Q = {_fmt(qn.mean)} +- {_fmt(qn.sd)} over {qn.n} optimised "
            f"{qn.model} null networks (seed {a.config.seed}); z = {_fmt(qn.z, 2)}, empirical p = "
            f"{_fmt(qn.p_greater, 4)}{' (**degenerate**: the nulls do not vary, the p says nothing)' if qn.degenerate else ''}; "
            f"paper: not tested against nulls. *{s['modularity_null']}.*"
        )
    if a.nodf_obs:
        lines.append(
            f"- NODF = {a.nodf_obs.nodf:.2f} (N_row {a.nodf_obs.n_row:.2f}, N_col {a.nodf_obs.n_col:.2f}). *{s['nodf']}.*"
        )
    degenerate = [m for m, x in a.nulls.items() if x.degenerate]
    if (a.nodf_obs and a.nodf_obs.nodf == 0) or degenerate:
        lines.append(
            f"- **Degenerate**: NODF = {a.nodf_obs.nodf if a.nodf_obs else float('nan'):.2f}; nulls with no "
            f"variance: {', '.join(degenerate) or 'none'}. A z or p against such nulls says nothing about "
            "nestedness."
        )
    lines += [
        "",
        "| null model | mean | sd | z | p_less | p_greater | n | degenerate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {m} | {_fmt(x.mean, 2)} | {_fmt(x.sd, 2)} | {_fmt(x.z, 2)} | {_fmt(x.p_less, 4)} | {_fmt(x.p_greater, 4)} | {x.n} | {'yes' if x.degenerate else 'no'} |"
        for m, x in a.nulls.items()
    ]
    lines += [
        "",
        f'Paper: z = {PAPER["nodf_z"]} ("less nested than random", null model not stated). *{s["nulls"]}.*',
        "",
    ]
    lines += [
        "## Sensitivity to the validation conventions",
        "",
        sensitivity_markdown(a.sensitivity),
        "",
        f"*{s['sensitivity']}.*",
        "",
        "## Roles and informational value",
        f"*{s['roles']}.* *{s['kl']}.*",
        f"- I(F; D) = {_fmt(a.mutual_information_nats, 4)} nats.",
    ]
    for k, r in a.hubs_vs_information.items():
        lines.append(f"- Spearman {k}: rho = {_fmt(r.rho)} (p_t {_fmt(r.p_t, 4)}, n = {r.n}).")
    if (kn := a.kl_null) is not None:
        sig = int(np.sum(np.asarray(kn.p) <= 0.05))
        lines.append(
            f"- Against the label-permutation null ({kn.n} permutations): rho(N_f, KL) = {_fmt(kn.rho_obs)} vs null "
            f"{_fmt(kn.rho_null_mean)} +- {_fmt(kn.rho_null_sd)} (p_less {_fmt(kn.rho_p_less, 4)}, p_greater "
            f"{_fmt(kn.rho_p_greater, 4)}); rho(N_f, KL - null mean) = {_fmt(kn.rho_excess)}; {sig} of "
            f"{int(np.isfinite(kn.p).sum())} findings have KL above the null at p <= 0.05 (uncorrected). "
            f"*{s['kl_null']}.*"
        )
    lines += ["", "## Questioning flow and Markov order", f"*{s['flow']}.* *{s['markov']}.*", ""]
    if a.markov:
        lines += [
            "| order | logL | npar full | npar obs | AIC full | BIC full | AIC obs | BIC obs |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {f.order} | {f.loglik:.1f} | {f.npar_full} | {f.npar_observed} | {f.aic_full:.1f} | {f.bic_full:.1f} | {f.aic_observed:.1f} | {f.bic_observed:.1f} |"
            for f in a.markov.fits
        ]
        lines += [
            "",
            f"Order by criterion: {order_choices(a.markov.selected, cv)} (n = {a.markov.n} targets).",
        ]
    lines += ["", markov_table(a), "", f"*{s['markov_both']}.*", ""]
    if cv:
        acc = ", ".join(f"order {k}: {100 * v:.1f}%" for k, v in cv.accuracy.items())
        lines += [
            f"- CV next-category accuracy ({cv.n_targets} targets, {cv.n_folds} folds): {acc}; paper: order 0 23.8%, order 1 40.6%. *{s['cv']}.*"
        ]
    ph = a.phases
    early = [str(c) for c, p in ph.phase.items() if p == 1]
    late = [str(c) for c, p in ph.phase.items() if p == 2]
    lines += [
        f"- Two phases: cut at relative position {_fmt(ph.tau, 2)}; early: {', '.join(early)}; late: {', '.join(late)}. *{s['phases']}.*",
    ]
    if (pn := a.phase_null) is not None:
        lines.append(
            f"- The split against {pn.n} shuffled-position nulls (each interview's categories permuted within it): "
            f"MI {_fmt(pn.obs, 4)} vs null {_fmt(pn.mean, 4)} +- {_fmt(pn.sd, 4)}, p = {_fmt(pn.p_greater, 4)}."
        )
    lines.append("")
    lines += ["## Design validation", f"*{s['validation']}.*", ""]
    for k, r in a.validation.items():
        lines.append(
            f"- {k}: rho = {_fmt(r.rho)} (p_t {_fmt(r.p_t, 4)}, exact p {_fmt(r.p_exact, 4)}, n = {r.n}; left out: {', '.join(r.left_out) or 'none'})."
        )
    lines += [f"- Paper: weights rho = {PAPER['rho_weights']}, order rho = {PAPER['rho_order']}.", ""]
    if a.notes:
        lines += ["## Notes", *[f"- {n}" for n in a.notes], ""]
    lines += [
        "## Figures",
        *[f"![{name}]({FIGS}/{name})" for name, p in figures.items() if p is not None],
        "",
    ]
    return "\n".join(lines)


def sensitivity_markdown(rows: list[dict[str, Any]]) -> str:
    """The sensitivity table: one line per (N_t convention, alpha, correction)."""
    head = "| N_t convention | N_t | alpha | correction | links | findings | diagnoses | modules | Q_B | null Q (mean +- sd) | z | p |"
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r['n_tests']} | {r['N_t']} | {r['alpha']} | {r['correction']} | {r['links']} | {r['findings']} | "
            f"{r['diagnoses']} | {r['modules']} | {_fmt(r['Q'])} | {_fmt(r['Q_null_mean'])} +- {_fmt(r['Q_null_sd'])} | "
            f"{_fmt(r['Q_z'], 2)} | {_fmt(r['Q_p'], 3)} |"
        )
    return "\n".join(lines)


def markov_table(a: NetworkAnalysis) -> str:
    """Markov order fits and CV accuracy under both self-loop conventions side by side."""
    lines = [
        "| self-loops | order | targets | logL | BIC full | BIC obs | AIC full | AIC obs | CV accuracy | order by criterion |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for policy, sel in a.markov_by_loops.items():
        if sel is None:
            continue
        cv = a.cv_by_loops.get(policy)
        picked = order_choices(sel.selected, cv)
        for f in sel.fits:
            acc = f"{100 * cv.accuracy[f.order]:.1f}%" if cv and f.order in cv.accuracy else "n/a"
            lines.append(
                f"| {policy}{' (headline)' if policy == a.config.self_loops else ''} | {f.order} | {sel.n} | {f.loglik:.1f} | "
                f"{f.bic_full:.1f} | {f.bic_observed:.1f} | {f.aic_full:.1f} | {f.aic_observed:.1f} | {acc} | {picked} |"
            )
    return "\n".join(lines)


def write_report(a: NetworkAnalysis, out_dir: str | Path) -> dict[str, Any]:
    """Writes tables, figures, ``summary.json`` and ``report.md`` under ``out_dir``; returns the summary."""
    root = Path(out_dir)
    (root / FIGS).mkdir(parents=True, exist_ok=True)
    for name, rows in tables(a).items():
        _write_csv(root / TABLES / name, rows)
    figures = {name: fn(a, root / FIGS / name) for name, fn in FIGURES.items()}
    s = summary(a)
    s["config"] = asdict(a.config)
    (root / SUMMARY).write_text(json.dumps(s, indent=2) + "\n", encoding="utf-8")
    (root / REPORT).write_text(markdown(a, figures), encoding="utf-8")
    return s
