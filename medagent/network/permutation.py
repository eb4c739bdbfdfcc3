"""A label-permutation null for the informational value of findings and its correlation with frequency.

Why a null: ``IV(f) = KL(P(D|f) || P(D))`` is estimated from ``sum_d N_fd`` co-occurrences. A finding seen
in three interviews has a three-point estimate of ``P(D|f)``, which is far from ``P(D)`` by chance alone,
so rare findings get a high IV even when findings and diagnoses are independent. The paper's "rare findings
carry most of the information" (a negative frequency ↔ KL correlation) must beat that bias to mean
anything.

The null (``kl_permutation_null``): the diagnosis rows of the interview × diagnosis incidence ``D`` are
permuted across interviews, ``F`` is kept. This breaks every finding–diagnosis association while keeping
each finding's frequency ``N_f``, each diagnosis's prevalence ``N_d``, and the number of diagnoses per
interview. Under each of ``n`` permutations the IVs (same prior convention) and Spearman's rho between
``N_f`` and IV are recomputed.

Reported per finding: the observed IV, the null mean, the excess ``IV - null mean`` and the empirical
``p = (1 + #{null IV >= obs}) / (n_finite + 1)`` (permutations where the finding co-occurs with no diagnosis
give no IV and are not counted). For the correlation: observed rho, null mean and sd, and
``p_less = (1 + #{null rho <= obs}) / (n + 1)`` ("more negative than chance"), ``p_greater`` likewise, plus
rho between ``N_f`` and the excess IV (frequency vs the information left once the small-sample bias is
removed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from medagent.interview.information import kl_information
from medagent.network.validation import spearman_rho


@dataclass(frozen=True)
class KLNull:
    """Observed IVs and correlations against the label-permutation null (module docstring)."""

    n: int
    seed: int
    prior: str
    observed: NDArray[np.float64]
    null_mean: NDArray[np.float64]
    p: NDArray[np.float64]
    rho_obs: float
    rho_null_mean: float
    rho_null_sd: float
    rho_p_less: float
    rho_p_greater: float
    rho_excess: float
    rho_samples: NDArray[np.float64] = field(repr=False, compare=False)

    @property
    def excess(self) -> NDArray[np.float64]:
        return self.observed - self.null_mean

    def to_dict(self) -> dict[str, Any]:
        keys = (
            "n",
            "seed",
            "prior",
            "rho_obs",
            "rho_null_mean",
            "rho_null_sd",
            "rho_p_less",
            "rho_p_greater",
        )
        return {k: getattr(self, k) for k in keys} | {"rho_frequency_vs_excess": self.rho_excess}


def _rho(freq: NDArray[np.float64], iv: NDArray[np.float64]) -> float:
    ok = np.isfinite(iv)
    return spearman_rho(freq[ok], iv[ok]) if ok.sum() > 2 else float("nan")


def kl_permutation_null(
    F: ArrayLike, D: ArrayLike, prior: str = "joint", n: int = 999, seed: int = 0
) -> KLNull:
    """IVs and the frequency ↔ IV Spearman rho against ``n`` permutations of the diagnosis rows.

    Args:
        F: Interview × finding incidence (binary).
        D: Interview × diagnosis incidence (same rows).
        prior: The ``P(D)`` convention of ``kl_information`` (``joint`` or ``prevalence``).
        n: Number of permutations.
        seed: Seed of the permutations.
    """
    Fi = (np.asarray(F) != 0).astype(np.int64)
    Di = (np.asarray(D) != 0).astype(np.int64)
    N_f = Fi.sum(axis=0).astype(float)
    N_d = Di.sum(axis=0)
    obs = kl_information(Fi.T @ Di, prior, N_d)
    rng = np.random.default_rng(seed)
    null = np.full((n, Fi.shape[1]), np.nan)
    rhos = np.full(n, np.nan)
    for i in range(n):
        null[i] = kl_information(Fi.T @ Di[rng.permutation(Di.shape[0])], prior, N_d)
        rhos[i] = _rho(N_f, null[i])
    finite = np.isfinite(null)
    with np.errstate(invalid="ignore"):
        total = np.where(finite, null, 0.0).sum(axis=0)
        mean = np.where(finite.any(axis=0), total / np.maximum(finite.sum(axis=0), 1), np.nan)
        ge = (finite & (null >= obs[None, :] - 1e-12)).sum(axis=0)
        p = np.where(np.isfinite(obs), (1 + ge) / (finite.sum(axis=0) + 1), np.nan)
    r_obs = _rho(N_f, obs)
    r = rhos[np.isfinite(rhos)]
    return KLNull(
        n=n,
        seed=seed,
        prior=prior,
        observed=obs,
        null_mean=mean,
        p=p,
        rho_obs=r_obs,
        rho_null_mean=float(r.mean()) if r.size else float("nan"),
        rho_null_sd=float(r.std(ddof=1)) if r.size > 1 else float("nan"),
        rho_p_less=float((1 + np.sum(r <= r_obs)) / (r.size + 1)),
        rho_p_greater=float((1 + np.sum(r >= r_obs)) / (r.size + 1)),
        rho_excess=_rho(N_f, obs - mean),
        rho_samples=rhos,
    )
