"""The full network analysis of the history-taking paper on a list of ``Annotation``: results as plain data, no files.

``analyze`` runs every metric of the issue in order: validated knowledge network G_B, Barber modules and the
significance of Q against optimised null networks, NODF with null models, roles, informational value, the
questioning-flow network, Markov order selection with cross-validation, the two phases and the design
validation. Null samples (NODF and modularity nulls) go through an injected ``map_fn`` (default: the builtin
serial ``map``) so a pipeline can fan them out as Ray tasks; the samples do not depend on the executor.
``conventions`` lists every choice the paper leaves open, for the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
from numpy.typing import NDArray

from medagent.interview.information import kl_information, mutual_information
from medagent.interview.order import load_priorities, mean_positions
from medagent.interview.types import INQUIRY_CATEGORIES, Annotation
from medagent.network.config import NetworkAnalysisConfig
from medagent.network.conventions import conventions
from medagent.network.flow import (
    Phases,
    category_shares,
    flow_network,
    phase_null,
    transition_counts,
    two_phases,
)
from medagent.network.markov import (
    SELF_LOOP_POLICIES,
    CVResult,
    OrderSelection,
    cv_accuracy,
    prepare,
    select_order,
)
from medagent.network.modularity import Partition, maximise_barber_q
from medagent.network.nestedness import NODFResult, nodf
from medagent.network.nulls import MapFn, NullSummary, modularity_null, nodf_null, summarise_null
from medagent.network.permutation import KLNull, kl_permutation_null
from medagent.network.roles import czvalues, role
from medagent.network.sensitivity import sensitivity_table
from medagent.network.svn import Incidence, SVNResult, incidence_from_annotations, svn_links
from medagent.network.validation import SpearmanResult, spearman_aligned, validate_design


@dataclass
class KnowledgeNetwork:
    """G_B after validation, without isolated nodes (rows = findings, columns = diagnoses)."""

    findings: list[str]
    diagnoses: list[str]
    B: NDArray[np.float64]  # binary validated links
    W: NDArray[np.float64]  # N_fd on the validated links (weighted variant)
    dropped_findings: int
    dropped_diagnoses: int

    @property
    def n_links(self) -> int:
        return int(self.B.sum())


@dataclass
class NetworkAnalysis:
    """Everything ``analyze`` computed; ``report.write_report`` turns it into files."""

    config: NetworkAnalysisConfig
    n_interviews: int
    incidence: Incidence
    svn: SVNResult
    network: KnowledgeNetwork
    modules_binary: Partition | None
    modules_weighted: Partition | None
    nodf_obs: NODFResult | None
    nulls: dict[str, NullSummary]
    # Binary Q_B against optimised null networks (None: skipped or no G_B).
    modularity_null: NullSummary | None
    finding_table: list[dict[str, Any]]
    diagnosis_table: list[dict[str, Any]]
    hubs_vs_information: dict[str, SpearmanResult]
    mutual_information_nats: float
    markov: OrderSelection | None
    cv: CVResult | None
    flow: nx.DiGraph
    transitions: NDArray[np.int64]
    shares: dict[str, float]
    positions: dict[str, float]
    phases: Phases
    validation: dict[str, SpearmanResult]
    conventions: dict[str, str]
    notes: list[str] = field(default_factory=list)
    # Markov fits and CV accuracy under each self-loop convention ("keep", "collapse").
    markov_by_loops: dict[str, OrderSelection | None] = field(default_factory=dict)
    cv_by_loops: dict[str, CVResult | None] = field(default_factory=dict)
    kl_null: KLNull | None = None
    sensitivity: list[dict[str, Any]] = field(default_factory=list)
    # The two-phase split's MI against its shuffled-position null (flow.phase_null); None when skipped.
    phase_null: NullSummary | None = None


def knowledge_network(inc: Incidence, svn: SVNResult, links: str) -> KnowledgeNetwork:
    """Validated links as a biadjacency matrix; findings and diagnoses left without a link are dropped."""
    keep = svn.validated(links)
    rows = np.asarray(keep.any(axis=1), dtype=bool)
    cols = np.asarray(keep.any(axis=0), dtype=bool)
    B = keep[rows][:, cols].astype(float)
    W = np.where(keep, svn.N_fd, 0)[rows][:, cols].astype(float)
    return KnowledgeNetwork(
        findings=[f for f, r in zip(inc.findings, rows.tolist(), strict=True) if r],
        diagnoses=[d for d, c in zip(inc.diagnoses, cols.tolist(), strict=True) if c],
        B=B,
        W=W,
        dropped_findings=int((~rows).sum()),
        dropped_diagnoses=int((~cols).sum()),
    )


def _finding_tables(
    inc: Incidence, svn: SVNResult, net: KnowledgeNetwork, part: Partition | None, cfg: NetworkAnalysisConfig
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    other = "prevalence" if cfg.kl_prior == "joint" else "joint"
    iv = iv2 = np.full(len(inc.findings), np.nan)
    if svn.N_fd.sum():
        iv = kl_information(svn.N_fd, cfg.kl_prior, svn.N_d)
        iv2 = kl_information(svn.N_fd, other, svn.N_d)
    row_of = {f: i for i, f in enumerate(net.findings)}
    czr = czvalues(net.B, part.row_labels, part.col_labels, "rows") if part else None
    czc = czvalues(net.B, part.row_labels, part.col_labels, "cols") if part else None
    findings = []
    for j, f in enumerate(inc.findings):
        i = row_of.get(f)
        c = float(czr.c[i]) if czr is not None and i is not None else float("nan")
        z = float(czr.z[i]) if czr is not None and i is not None else float("nan")
        findings.append(
            {
                "finding": f,
                "N_f": int(svn.N_f[j]),
                "degree": int(net.B[i].sum()) if i is not None else 0,
                "module": part.row_labels[i] if part and i is not None else None,
                "c": c,
                "z": z,
                "role": role(c, z) if i is not None and part else "",
                f"KL_{cfg.kl_prior}_nats": float(iv[j]),
                f"KL_{other}_nats": float(iv2[j]),
            }
        )
    col_of = {d: i for i, d in enumerate(net.diagnoses)}
    diagnoses = []
    for j, d in enumerate(inc.diagnoses):
        i = col_of.get(d)
        c = float(czc.c[i]) if czc is not None and i is not None else float("nan")
        z = float(czc.z[i]) if czc is not None and i is not None else float("nan")
        diagnoses.append(
            {
                "diagnosis": d,
                "N_d": int(svn.N_d[j]),
                "degree": int(net.B[:, i].sum()) if i is not None else 0,
                "module": part.col_labels[i] if part and i is not None else None,
                "c": c,
                "z": z,
                "role": role(c, z) if i is not None and part else "",
            }
        )
    return findings, diagnoses


def analyze(
    annotations: list[Annotation], cfg: NetworkAnalysisConfig | None = None, map_fn: MapFn = map
) -> NetworkAnalysis:
    """Runs the whole analysis (see the module docstring); ``map_fn`` executes the null-sample batches."""
    cfg = cfg or NetworkAnalysisConfig()
    notes: list[str] = []
    inc = incidence_from_annotations(annotations)
    svn = svn_links(inc.F, inc.D, cfg.alpha, cfg.n_tests)
    net = knowledge_network(inc, svn, cfg.links)
    part_b = part_w = None
    nodf_obs = None
    nulls: dict[str, NullSummary] = {}
    q_null = None
    if net.n_links:
        part_b = maximise_barber_q(net.B, weighted=False, restarts=cfg.modularity_restarts, seed=cfg.seed)
        part_w = maximise_barber_q(net.W, weighted=True, restarts=cfg.modularity_restarts, seed=cfg.seed)
        if cfg.modularity_null_samples > 0:
            q_null = modularity_null(
                net.B,
                cfg.modularity_null_model,
                cfg.modularity_null_samples,
                cfg.seed,
                restarts=cfg.modularity_restarts,
                opt_seed=cfg.seed,
                obs=part_b.Q,
                batch_size=cfg.modularity_null_batch_size,
                burnin=cfg.curveball_burnin,
                thin=cfg.curveball_thin,
                map_fn=map_fn,
            )
        nodf_obs = nodf(net.B, sort=cfg.nodf_sort)
        if min(net.B.shape) >= 2:
            for model in cfg.null_models:
                nulls[model] = nodf_null(
                    net.B,
                    model,
                    cfg.null_samples,
                    cfg.seed,
                    batch_size=cfg.null_batch_size,
                    burnin=cfg.curveball_burnin,
                    thin=cfg.curveball_thin,
                    sort=cfg.nodf_sort,
                    map_fn=map_fn,
                )
        else:
            notes.append("G_B has fewer than 2 findings or diagnoses: no NODF null models")
    else:
        notes.append(f"no {cfg.links} link survived validation: no modules, NODF or roles")
    findings, diagnoses = _finding_tables(inc, svn, net, part_b, cfg)
    kl_key = f"KL_{cfg.kl_prior}_nats"
    kl = {r["finding"]: r[kl_key] for r in findings}
    hubs = {
        "frequency_vs_kl": spearman_aligned(
            {r["finding"]: float(r["N_f"]) for r in findings}, kl, exact=False
        ),
        "participation_vs_kl": spearman_aligned(
            {r["finding"]: r["c"] for r in findings if r["degree"]}, kl, exact=False
        ),
    }
    states = list(INQUIRY_CATEGORIES)
    raw = [[c for c in a.category_sequence() if c in INQUIRY_CATEGORIES] for a in annotations]
    unknown = sum(c not in INQUIRY_CATEGORIES for a in annotations for c in a.category_sequence())
    if unknown:
        notes.append(f"{unknown} questions with a category outside the 11 were left out of the flow analysis")
    markov_by: dict[str, OrderSelection | None] = {}
    cv_by: dict[str, CVResult | None] = {}
    for policy in SELF_LOOP_POLICIES:
        markov_by[policy], cv_by[policy] = _markov(prepare(raw, policy), states, cfg)
    seqs = prepare(raw, cfg.self_loops)
    markov, cv = markov_by[cfg.self_loops], cv_by[cfg.self_loops]
    kl_null = None
    if cfg.kl_null_samples > 0 and svn.N_fd.sum():
        kl_null = kl_permutation_null(inc.F, inc.D, cfg.kl_prior, cfg.kl_null_samples, cfg.seed)
        for row, iv_mean, p in zip(findings, kl_null.null_mean, kl_null.p, strict=True):
            row[f"KL_{cfg.kl_prior}_null_mean"] = float(iv_mean)
            row[f"KL_{cfg.kl_prior}_excess"] = float(row[kl_key] - iv_mean)
            row[f"KL_{cfg.kl_prior}_perm_p"] = float(p)
    sens = sensitivity_table(
        inc,
        cfg.sensitivity,
        null_model=cfg.modularity_null_model,
        seed=cfg.seed,
        burnin=cfg.curveball_burnin,
        thin=cfg.curveball_thin,
        batch_size=cfg.modularity_null_batch_size,
        map_fn=map_fn,
    )
    shares = category_shares(seqs, states)
    positions = mean_positions(seqs, states, cfg.position)
    priorities = load_priorities(cfg.priorities)
    return NetworkAnalysis(
        config=cfg,
        n_interviews=inc.n_interviews,
        incidence=inc,
        svn=svn,
        network=net,
        modules_binary=part_b,
        modules_weighted=part_w,
        nodf_obs=nodf_obs,
        nulls=nulls,
        modularity_null=q_null,
        finding_table=findings,
        diagnosis_table=diagnoses,
        hubs_vs_information=hubs,
        mutual_information_nats=mutual_information(svn.N_fd) if svn.N_fd.sum() else float("nan"),
        markov=markov,
        cv=cv,
        flow=flow_network(seqs, states),
        transitions=transition_counts(seqs, states),
        shares={str(k): v for k, v in shares.items()},
        positions={str(k): v for k, v in positions.items()},
        phases=two_phases(seqs, states),
        validation=validate_design(shares, positions, priorities),  # type: ignore[arg-type]
        conventions=conventions(cfg, len(states)),
        notes=notes,
        markov_by_loops=markov_by,
        cv_by_loops=cv_by,
        kl_null=kl_null,
        sensitivity=sens,
        phase_null=(
            summarise_null(*phase_null(seqs, states, cfg.phase_null_samples, cfg.seed), "shuffled positions")
            if cfg.phase_null_samples and seqs
            else None
        ),
    )


def _markov(
    seqs: list[list[Any]], states: list[Any], cfg: NetworkAnalysisConfig
) -> tuple[OrderSelection | None, CVResult | None]:
    """Order selection and CV accuracy of one self-loop convention (None without targets)."""
    n_targets = sum(max(0, len(s) - cfg.max_order) for s in seqs)
    if not n_targets:
        return None, None
    markov = select_order(seqs, cfg.max_order, n_states=len(states))
    cv = (
        cv_accuracy(seqs, cfg.max_order, states=states, n_folds=cfg.cv_folds, seed=cfg.seed)
        if len(seqs) >= 2
        else None
    )
    return markov, cv
