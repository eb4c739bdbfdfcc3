"""Every convention of the network analysis in words, keyed by the result it decides (for the report).

Kept apart from ``analysis`` so the report's wording of a choice sits in one place, next to the config
fields that make it.
"""

from __future__ import annotations

from medagent.network.config import NetworkAnalysisConfig

N_T_WORDS = {
    "all_pairs": "|F|*|D| (all pairs, also never co-occurring)",
    "cooccurring": "pairs with N_fd >= 1 (never co-occurring pairs are not tests)",
    "tarone": "Tarone 1990: smallest K with <= K pairs whose smallest attainable p <= alpha/K; only those tested",
}
SELF_LOOP_WORDS = {
    "collapse": "runs of one category merged into one visit",
    "keep": "consecutive questions of one category kept as self-transitions",
}


def conventions(cfg: NetworkAnalysisConfig, n_states: int) -> dict[str, str]:
    """The choices the paper leaves open, in words, keyed by result."""
    return {
        "interviews": "N = all interviews given (also those without a positive finding or a diagnosis)",
        "findings": "positive findings only (pertinent negatives dropped); binarised per interview",
        "svn": (
            f"hypergeometric over-expression p = hypergeom.sf(N_fd-1, N, N_f, N_d); N_t = {N_T_WORDS[cfg.n_tests]}; "
            f"Bonferroni p < {cfg.alpha}/N_t (strict); BH step-up at {cfg.alpha} over the tested pairs"
        ),
        "network": f"G_B = {cfg.links} links; findings and diagnoses left isolated are dropped before modules, NODF and roles",
        "modularity": (
            f"Barber Q_B (own barber_q), maximised by leidenalg three-layer CPM, best of "
            f"{cfg.modularity_restarts} seeded restarts (a lower bound on max Q); binary G_B, weighted variant "
            "uses N_fd; modules = groups holding a linked row and a linked column"
        ),
        "modularity_null": (
            f"binary Q_B against {cfg.modularity_null_samples} {cfg.modularity_null_model} null networks of G_B "
            f"(seed {cfg.seed}, batches of {cfg.modularity_null_batch_size}"
            + (
                f", curveball burn-in {cfg.curveball_burnin}, thin {cfg.curveball_thin}, one chain per batch"
                if cfg.modularity_null_model == "curveball"
                else ""
            )
            + f"), each optimised like G_B (best of {cfg.modularity_restarts} Leiden restarts, not G_B's "
            "partition); z = (obs-mean)/sd (sd ddof=1); p = p_greater = (1+#{null Q>=obs})/(n+1) for 'more "
            "modular than random'"
        ),
        "nodf": (
            f"NODF on 0-100, {'sorted by decreasing fill (vegan order=TRUE)' if cfg.nodf_sort else 'as presented'}; "
            "zero rows/columns of null matrices kept in the denominators (vegan)"
        ),
        "nulls": (
            f"{', '.join(cfg.null_models)}; {cfg.null_samples} samples each; curveball burn-in "
            f"{cfg.curveball_burnin}, thin {cfg.curveball_thin}, one chain per batch of {cfg.null_batch_size}; "
            "z = (obs-mean)/sd (sd ddof=1); p_less = (1+#{sim<=obs})/(n+1) for 'less nested than random'"
        ),
        "roles": "bipartite czvalues: c = 1 - sum_t (k_it/k_i)^2; z over same-type nodes of the module, sd n-1, "
        "0/0 -> 0, single node of its type -> NaN; Olesen et al. 2007 roles c > 0.62, z > 2.5",
        "kl": (
            f"IV(f) = KL(P(D|f) || P(D)) in nats; P(d|f) = N_fd / sum_d N_fd; P(D) = {cfg.kl_prior} "
            "(joint = column marginal of the co-occurrence table; prevalence = N_d / sum N_d also tabled); no smoothing"
        ),
        "flow": (
            f"self-loops {cfg.self_loops} ({SELF_LOOP_WORDS[cfg.self_loops]}); transitions within interviews "
            "only; edge weight = count / out-count"
        ),
        "kl_null": (
            f"label permutation: diagnosis rows of the interview x diagnosis incidence shuffled across interviews "
            f"({cfg.kl_null_samples} permutations, seed {cfg.seed}), findings kept (N_f, N_d and diagnoses per "
            "interview unchanged); per finding p = (1+#{null IV >= IV})/(n_finite+1); rho(N_f, IV) against the "
            "null rhos, p_less = (1+#{null rho <= rho})/(n+1); excess IV = IV - null mean IV"
        ),
        "markov_both": (
            "every order and CV accuracy computed under both self-loop conventions; collapse merges consecutive "
            "questions of one category into one visit, keep counts them as self-transitions"
        ),
        "sensitivity": (
            f"grid N_t in {cfg.sensitivity.n_tests} x alpha in {cfg.sensitivity.alphas} x {cfg.sensitivity.links}; "
            f"per cell G_B without isolated nodes, binary Q_B best of {cfg.sensitivity.restarts} Leiden restarts, "
            f"against {cfg.sensitivity.null_samples} optimised {cfg.modularity_null_model} nulls (seed {cfg.seed}); "
            "p = (1+#{null Q >= Q})/(n+1)"
        ),
        "markov": (
            f"orders 0..{cfg.max_order} on the same targets t >= {cfg.max_order} (0-based); S = {n_states} states; "
            "npar full S^k(S-1) and observed (distinct successors - 1 per context); AIC, BIC with n = #targets; "
            "the order each of AIC, BIC and CV picks is shown side by side"
        ),
        "cv": (
            f"{cfg.cv_folds or 'leave-one-interview-out'} folds by interview (seed {cfg.seed}); argmax successor, back-off "
            "to shorter contexts, ties to the category listed first; first max_order questions not scored; micro accuracy"
        ),
        "phases": (
            "relative position (t+0.5)/T; cut maximising I(phase; category) on a 0.10..0.90 grid; against "
            f"{cfg.phase_null_samples} shuffled-position nulls (categories permuted within each interview, best "
            "cut searched again)"
        ),
        "validation": (
            f"Spearman rho (average ranks, aligned by label, rank 1 = first); physicians' order by mean relative "
            f"position ({cfg.position}); exact permutation p by enumeration"
        ),
    }
