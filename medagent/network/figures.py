"""Figures of the network report, one function per figure.

Drawn on ``matplotlib.figure.Figure`` objects (no pyplot): no display and no global backend switch, so
importing this module changes nothing for a caller's own plots.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from medagent.network.roles import C_CRIT, Z_CRIT

if TYPE_CHECKING:
    from medagent.network.analysis import NetworkAnalysis


def _figure(w: float, h: float) -> Figure:
    return Figure(figsize=(w, h))


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    return path


def modules_figure(a: NetworkAnalysis, path: Path) -> Path | None:
    """G_B as a biadjacency matrix sorted by Barber module, modules outlined (bipartite's plotModuleWeb)."""
    part, net = a.modules_binary, a.network
    if part is None or not net.n_links:
        return None
    r_order = np.argsort(np.array(part.row_labels), kind="stable")
    c_order = np.argsort(np.array(part.col_labels), kind="stable")
    M = net.W[r_order][:, c_order]
    h, w = M.shape
    fig = _figure(max(6.0, 0.22 * w + 3), max(4.0, 0.16 * h + 2))
    ax = fig.subplots()
    ax.imshow(np.where(M > 0, np.log1p(M), np.nan), cmap="viridis", aspect="auto", interpolation="nearest")
    rl = np.array(part.row_labels)[r_order]
    cl = np.array(part.col_labels)[c_order]
    for mod in np.unique(np.concatenate([rl, cl])):
        rows, cols = np.flatnonzero(rl == mod), np.flatnonzero(cl == mod)
        if rows.size and cols.size:
            ax.add_patch(
                Rectangle((cols[0] - 0.5, rows[0] - 0.5), cols.size, rows.size, fill=False, ec="red", lw=1.2)
            )
    ax.set_yticks(range(h), [net.findings[i] for i in r_order], fontsize=6)
    ax.set_xticks(range(w), [net.diagnoses[i] for i in c_order], fontsize=6, rotation=90)
    ax.set_title(
        f"G_B: {net.n_links} validated links, Q_B = {part.Q:.3f}, {part.modules} modules\n(colour: log(1 + N_fd))",
        fontsize=9,
    )
    return _save(fig, path)


def nulls_figure(a: NetworkAnalysis, path: Path) -> Path | None:
    """Histogram of null NODF per model with the observed value."""
    if not a.nulls:
        return None
    fig = _figure(4 * len(a.nulls), 3.2)
    axes = fig.subplots(1, len(a.nulls), squeeze=False)
    for ax, (model, s) in zip(axes[0], a.nulls.items(), strict=True):
        ax.hist(s.samples, bins=30, color="0.7")
        ax.axvline(s.obs, color="red", label=f"observed {s.obs:.1f}")
        ax.set_title(f"{model}: z = {s.z:.2f}, p_less = {s.p_less:.3g}", fontsize=9)
        ax.set_xlabel("NODF (0-100)")
        ax.legend(fontsize=7)
    return _save(fig, path)


def modularity_null_figure(a: NetworkAnalysis, path: Path) -> Path | None:
    """Histogram of the optimised Q_B of the null networks with the observed Q_B."""
    s = a.modularity_null
    if s is None:
        return None
    fig = _figure(4.5, 3.2)
    ax = fig.subplots()
    ax.hist(s.samples, bins=min(30, max(5, s.n // 5)), color="0.7")
    ax.axvline(s.obs, color="red", label=f"observed {s.obs:.3f}")
    ax.set_title(f"{s.model} nulls (n = {s.n}): z = {s.z:.2f}, p = {s.p_greater:.3g}", fontsize=9)
    ax.set_xlabel("best Barber Q_B of each null network")
    ax.legend(fontsize=7)
    return _save(fig, path)


def roles_figure(a: NetworkAnalysis, path: Path) -> Path | None:
    """c-z plot of findings with the Olesen et al. thresholds."""
    rows = [r for r in a.finding_table if r["degree"]]
    if not rows:
        return None
    c = np.array([r["c"] for r in rows])
    z = np.nan_to_num(np.array([r["z"] for r in rows]))
    fig = _figure(6, 4.5)
    ax = fig.subplots()
    ax.scatter(c, z, s=12 + 6 * np.array([r["degree"] for r in rows]), alpha=0.6)
    ax.axvline(C_CRIT, ls="--", c="0.5")
    ax.axhline(Z_CRIT, ls="--", c="0.5")
    for i in np.argsort(-(c + z / 5))[:8]:
        ax.annotate(rows[i]["finding"], (c[i], z[i]), fontsize=6)
    ax.set_xlabel("participation c")
    ax.set_ylabel("within-module z (NaN shown as 0)")
    ax.set_title("Finding roles (size: degree in G_B)")
    return _save(fig, path)


def kl_figure(a: NetworkAnalysis, path: Path, top: int = 30) -> Path | None:
    """Informational value of the findings (highest first), bars coloured by frequency."""
    key = f"KL_{a.config.kl_prior}_nats"
    rows = sorted((r for r in a.finding_table if np.isfinite(r[key])), key=lambda r: -r[key])[:top]
    if not rows:
        return None
    fig = _figure(7, 0.22 * len(rows) + 1.5)
    ax = fig.subplots()
    freq = np.array([r["N_f"] for r in rows], dtype=float)
    colors = matplotlib.colormaps["plasma"](freq / freq.max())
    ax.barh(range(len(rows)), [r[key] for r in rows], color=colors)
    ax.set_yticks(range(len(rows)), [f"{r['finding']} (n={r['N_f']})" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"KL(P(D|f) || P(D)), nats, prior = {a.config.kl_prior}")
    ax.set_title("Informational value of findings (colour: frequency)")
    return _save(fig, path)


def flow_figure(a: NetworkAnalysis, path: Path) -> Path:
    """Row-normalised transition probabilities between the question categories."""
    T = a.transitions.astype(float)
    P = np.divide(
        T, T.sum(axis=1, keepdims=True), out=np.zeros_like(T), where=T.sum(axis=1, keepdims=True) > 0
    )
    labels = [str(n) for n in a.flow.nodes]
    fig = _figure(7, 6)
    ax = fig.subplots()
    im = ax.imshow(P, cmap="Blues", vmin=0, vmax=1)
    for i in range(P.shape[0]):
        for j in range(P.shape[1]):
            if T[i, j]:
                ax.text(j, i, f"{P[i, j]:.2f}", ha="center", va="center", fontsize=6)
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_xlabel("next category")
    ax.set_ylabel("current category")
    ax.set_title(f"Questioning flow G_Q (self-loops: {a.config.self_loops})")
    fig.colorbar(im, ax=ax, fraction=0.046)
    return _save(fig, path)


def markov_figure(a: NetworkAnalysis, path: Path) -> Path | None:
    """AIC and BIC (both parameter counts) per order, with cross-validated accuracy."""
    if a.markov is None:
        return None
    orders = [f.order for f in a.markov.fits]
    fig = _figure(6, 4)
    ax = fig.subplots()
    for key, style in (
        ("aic_full", "-o"),
        ("bic_full", "-s"),
        ("aic_observed", "--o"),
        ("bic_observed", "--s"),
    ):
        ax.plot(orders, [getattr(f, key) for f in a.markov.fits], style, label=key)
    ax.set_yscale("log")
    ax.set_xlabel("Markov order")
    ax.set_ylabel("information criterion")
    ax.set_xticks(orders)
    if a.cv is not None:
        ax2 = ax.twinx()
        ax2.plot(orders, [100 * a.cv.accuracy[k] for k in orders], "-^", c="black", label="CV accuracy")
        ax2.set_ylabel("CV next-category accuracy (%)")
        ax2.legend(loc="center right", fontsize=7)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(f"Order selection (n = {a.markov.n} targets)")
    return _save(fig, path)


def phases_figure(a: NetworkAnalysis, path: Path) -> Path | None:
    """Category shares before and after the best phase cut."""
    ph = a.phases
    if not ph.share_early:
        return None
    labels = list(ph.share_early)
    x = np.arange(len(labels))
    fig = _figure(7, 3.8)
    ax = fig.subplots()
    ax.bar(x - 0.2, [ph.share_early[k] for k in labels], 0.4, label=f"early (< {ph.tau:.2f})")
    ax.bar(x + 0.2, [ph.share_late[k] for k in labels], 0.4, label=f"late (>= {ph.tau:.2f})")
    ax.set_xticks(x, [str(k) for k in labels], rotation=60, fontsize=7)
    ax.set_ylabel("share of the phase's questions")
    ax.set_title(f"Two empirical phases (I = {ph.mutual_information:.3f} nats)")
    ax.legend(fontsize=7)
    return _save(fig, path)


FIGURES = {
    "modules.png": modules_figure,
    "modularity_null.png": modularity_null_figure,
    "nodf_nulls.png": nulls_figure,
    "roles_cz.png": roles_figure,
    "kl_information.png": kl_figure,
    "flow_heatmap.png": flow_figure,
    "markov_ic.png": markov_figure,
    "phases.png": phases_figure,
}
