"""Informational value of a finding: ``IV(f) = KL(P(D|f) || P(D))`` (Kullback & Leibler 1951).

Conventions (METHODS.md §1.5):

* ``P(d|f) = N_fd / sum_d' N_fd'``: co-occurrence counts normalised by their row sum, because an interview
  can carry several diagnoses (``N_fd / N_f`` is then not a distribution).
* Two priors: ``joint`` takes ``P(d)`` as the column marginal of the finding × diagnosis co-occurrence table,
  which gives the identity ``sum_f P(f) KL_f = I(F; D)``; ``prevalence`` takes ``P(d) = N_d / sum N_d'``,
  the share of diagnosis mentions over interviews.
* Terms with ``P(d|f) = 0`` contribute 0; no smoothing. A finding that never co-occurs with a diagnosis
  has no ``P(D|f)``: its IV is NaN.
* Natural log (nats) by default; ``base=2`` gives bits (= nats / ln 2).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import rel_entr

PRIORS = ("joint", "prevalence")


def prior(
    cooc: ArrayLike, kind: str = "joint", diagnosis_counts: ArrayLike | None = None
) -> NDArray[np.float64]:
    """``P(D)`` under the ``joint`` or ``prevalence`` convention (the latter needs ``diagnosis_counts``)."""
    C = np.asarray(cooc, dtype=float)
    if kind == "joint":
        return C.sum(axis=0) / C.sum()
    if kind == "prevalence":
        if diagnosis_counts is None:
            raise ValueError("prior='prevalence' needs diagnosis_counts (N_d per diagnosis)")
        nd = np.asarray(diagnosis_counts, dtype=float)
        return nd / nd.sum()
    raise ValueError(f"unknown prior {kind!r}; expected one of {PRIORS}")


def conditional(cooc: ArrayLike) -> NDArray[np.float64]:
    """``P(d|f)`` row by row (NaN rows for findings without any co-occurrence)."""
    C = np.asarray(cooc, dtype=float)
    rs = C.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(rs > 0, C / rs, np.nan)


def kl_information(
    cooc: ArrayLike,
    prior_kind: str = "joint",
    diagnosis_counts: ArrayLike | None = None,
    base: float | None = None,
) -> NDArray[np.float64]:
    """IV of every finding (row of ``cooc``).

    Args:
        cooc: Finding × diagnosis co-occurrence counts ``N_fd``.
        prior_kind: ``joint`` or ``prevalence`` (see the module docstring).
        diagnosis_counts: ``N_d`` per diagnosis, needed for ``prevalence``.
        base: Logarithm base; None for nats, 2 for bits.
    """
    P = conditional(cooc)
    q = prior(cooc, prior_kind, diagnosis_counts)
    if np.any((P > 0) & (q[None, :] == 0)):
        raise ValueError("P(d) is 0 where some P(d|f) > 0: KL is infinite under this prior")
    kl = np.where(np.isnan(P).any(axis=1), np.nan, rel_entr(np.nan_to_num(P), q[None, :]).sum(axis=1))
    return kl / math.log(base) if base else kl


def mutual_information(cooc: ArrayLike, base: float | None = None) -> float:
    """``I(F; D)`` of the co-occurrence table as a joint distribution (check: ``sum_f P(f) IV_joint(f)``)."""
    C = np.asarray(cooc, dtype=float)
    J = C / C.sum()
    indep = J.sum(axis=1, keepdims=True) * J.sum(axis=0, keepdims=True)
    mi = float(rel_entr(J, np.where(indep > 0, indep, 1.0)).sum())
    return mi / math.log(base) if base else mi
