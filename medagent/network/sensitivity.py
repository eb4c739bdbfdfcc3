"""How much of the knowledge network is a consequence of the validation conventions.

The number of links that survive validation, and everything computed on them (modules, Q_B and its null),
depends on three choices the paper does not print: the level ``alpha``, the correction (Bonferroni or BH)
and the number of tests ``N_t`` (``svn.N_TESTS``). ``sensitivity_table`` recomputes the validated network
for every combination and reports, per cell: ``N_t``, links, findings and diagnoses left in G_B, the binary
Barber Q_B with its module count, and Q_B against optimised fixed–fixed null networks (``nulls.modularity_null``,
fewer samples and restarts than the headline analysis, to keep a sweep of 18 cells affordable; the cell's
conventions are columns of the table). Cells with the same link set share one computation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from medagent.network.modularity import maximise_barber_q
from medagent.network.nulls import MapFn, modularity_null
from medagent.network.svn import METHODS, N_TESTS, Incidence, svn_links


@dataclass
class SensitivityConfig:
    """The grid of the sensitivity table and the cost of each cell's modularity null."""

    n_tests: list[str] = field(default_factory=lambda: list(N_TESTS))
    alphas: list[float] = field(default_factory=lambda: [0.05, 0.01, 0.001])
    links: list[str] = field(default_factory=lambda: list(METHODS))
    # Optimised null networks per cell (0 = Q only) and Leiden restarts for the cell's G_B and each null.
    null_samples: int = 99
    restarts: int = 20


def sensitivity_table(
    inc: Incidence,
    cfg: SensitivityConfig,
    *,
    null_model: str = "curveball",
    seed: int = 0,
    burnin: int = 10_000,
    thin: int = 100,
    batch_size: int = 10,
    map_fn: MapFn = map,
) -> list[dict[str, Any]]:
    """One row per (N_t convention, alpha, correction): the validated network and its modularity."""
    rows: list[dict[str, Any]] = []
    cache: dict[bytes, dict[str, Any]] = {}
    for convention in cfg.n_tests:
        for alpha in cfg.alphas:
            svn = svn_links(inc.F, inc.D, alpha, convention)
            for method in cfg.links:
                keep = svn.validated(method)
                key = np.packbits(keep).tobytes() + str(keep.shape).encode()
                if key not in cache:
                    cache[key] = _modules(keep, cfg, null_model, seed, burnin, thin, batch_size, map_fn)
                rows.append(
                    {
                        "n_tests": convention,
                        "N_t": svn.n_tests,
                        "alpha": alpha,
                        "correction": method,
                        "links": int(keep.sum()),
                        **cache[key],
                        "null_model": null_model if cfg.null_samples else "",
                        "null_samples": cfg.null_samples,
                        "restarts": cfg.restarts,
                    }
                )
    return rows


def _modules(
    keep: np.ndarray,
    cfg: SensitivityConfig,
    null_model: str,
    seed: int,
    burnin: int,
    thin: int,
    batch_size: int,
    map_fn: MapFn,
) -> dict[str, Any]:
    nan = float("nan")
    rows, cols = keep.any(axis=1), keep.any(axis=0)
    B = keep[rows][:, cols].astype(float)
    out: dict[str, Any] = {
        "findings": int(rows.sum()),
        "diagnoses": int(cols.sum()),
        "modules": 0,
        "Q": nan,
        "Q_null_mean": nan,
        "Q_null_sd": nan,
        "Q_z": nan,
        "Q_p": nan,
    }
    if not B.size:
        return out
    part = maximise_barber_q(B, weighted=False, restarts=cfg.restarts, seed=seed)
    out |= {"modules": part.modules, "Q": part.Q}
    # A null needs two rows and two columns to trade anything; below that Q has no distribution.
    if cfg.null_samples > 0 and min(B.shape) >= 2:
        q = modularity_null(
            B,
            null_model,
            cfg.null_samples,
            seed,
            restarts=cfg.restarts,
            opt_seed=seed,
            obs=part.Q,
            batch_size=batch_size,
            burnin=burnin,
            thin=thin,
            map_fn=map_fn,
        )
        out |= {"Q_null_mean": q.mean, "Q_null_sd": q.sd, "Q_z": q.z, "Q_p": q.p_greater}
    return out
