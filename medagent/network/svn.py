"""Statistically validated finding–diagnosis links (Tumminello et al. 2011, PLoS ONE 6:e17994).

Conventions (METHODS.md §1.1), fixed here and reported next to every result:

* The "other" set of the bipartite system is the interviews. ``N`` is the number of **all** interviews
  passed in, including interviews with no positive finding or no diagnosis.
* Only **positive** findings count; pertinent negatives are dropped. Repeated mentions are binarised per
  interview.
* The over-expression p of a pair is ``P(X >= N_fd)`` under the hypergeometric null with ``N_f`` and ``N_d``
  fixed, i.e. ``hypergeom.sf(N_fd - 1, N, N_f, N_d)``; under-expression is ``hypergeom.cdf(N_fd, ...)``.
* Multiple testing runs over ``N_t`` tests, a convention (``N_TESTS``; the default is Tumminello's):

  - ``all_pairs``: ``N_t = |F| * |D|``, **every** finding × diagnosis pair, including pairs that never
    co-occur (their p is 1);
  - ``cooccurring``: only the pairs seen together at least once (``N_fd >= 1``); a pair never seen together
    cannot be over-expressed, so it is not counted as a test;
  - ``tarone``: Tarone's (1990) testable pairs. A pair's smallest attainable p is
    ``P(X >= min(N_f, N_d))``; ``N_t`` is the smallest ``K`` with at most ``K`` pairs whose smallest
    attainable p is ``<= alpha / K``, and only those pairs are tested (the others could never pass).

  Bonferroni keeps ``p < alpha / N_t`` (strict, as Tumminello); Benjamini–Hochberg is the step-up rule
  ``p_(k) <= k * alpha / N_t`` over the tested pairs and keeps every ``p <= p_(k*)``. Untested pairs are
  never validated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import hypergeom

from medagent.interview.types import Annotation

METHODS = ("bonferroni", "bh")
N_TESTS = ("all_pairs", "cooccurring", "tarone")


@dataclass(frozen=True)
class Incidence:
    """Interview × finding and interview × diagnosis incidence (binary).

    Attributes:
        interview_ids: Row labels of both matrices (all interviews, in input order).
        findings: Column labels of ``F`` (sorted).
        diagnoses: Column labels of ``D`` (sorted).
        F: Bool array ``(N, |F|)``: finding present (positive) in interview.
        D: Bool array ``(N, |D|)``: diagnosis stated in interview.
    """

    interview_ids: tuple[str, ...]
    findings: tuple[str, ...]
    diagnoses: tuple[str, ...]
    F: NDArray[np.bool_]
    D: NDArray[np.bool_]

    @property
    def n_interviews(self) -> int:
        return len(self.interview_ids)


def _labels(values: Sequence[str]) -> set[str]:
    return {v.strip() for v in values if v and v.strip()}


def incidence_from_annotations(annotations: Sequence[Annotation]) -> Incidence:
    """Builds the binary incidence matrices from annotations.

    Positive findings only (``negative_findings`` are ignored); a finding or diagnosis mentioned several
    times in one interview counts once. Every annotation is one interview row, so ``N = len(annotations)``
    whether or not it has findings or diagnoses. Names are stripped of surrounding blanks, not case-folded:
    annotators emit canonical ontology names.
    """
    pos = [_labels(a.positive_findings) for a in annotations]
    dx = [_labels(a.diagnoses) for a in annotations]
    findings = tuple(sorted(set().union(*pos))) if pos else ()
    diagnoses = tuple(sorted(set().union(*dx))) if dx else ()
    fi = {f: j for j, f in enumerate(findings)}
    di = {d: j for j, d in enumerate(diagnoses)}
    F = np.zeros((len(annotations), len(findings)), dtype=bool)
    D = np.zeros((len(annotations), len(diagnoses)), dtype=bool)
    for i, (p, d) in enumerate(zip(pos, dx, strict=True)):
        F[i, [fi[x] for x in p]] = True
        D[i, [di[x] for x in d]] = True
    return Incidence(tuple(a.interview_id for a in annotations), findings, diagnoses, F, D)


def bh_reject(p: ArrayLike, alpha: float, n_tests: int | None = None) -> NDArray[np.bool_]:
    """Benjamini–Hochberg (1995) step-up decisions.

    Args:
        p: p-values of the tests at hand.
        alpha: FDR level q.
        n_tests: Total number of tests ``N_t`` (defaults to ``len(p)``); tests left out of ``p`` are taken
            to have p = 1, so they are never rejected but still count in the thresholds.

    Returns:
        Bool array, True where the null is rejected: every ``p <= p_(k*)`` with ``k*`` the largest ``k``
        such that ``p_(k) <= k * alpha / N_t`` (non-strict, as in the original rule).
    """
    pv = np.asarray(p, dtype=float)
    nt = pv.size if n_tests is None else n_tests
    if nt < pv.size:
        raise ValueError(f"n_tests={nt} is smaller than the number of p-values ({pv.size})")
    if pv.size == 0:
        return np.zeros(0, dtype=bool)
    order = np.sort(pv)
    ok = order <= np.arange(1, pv.size + 1) * alpha / nt
    if not ok.any():
        return np.zeros(pv.shape, dtype=bool)
    k_star = int(np.flatnonzero(ok)[-1])
    return pv <= order[k_star]


def bh_adjust(p: ArrayLike, n_tests: int | None = None) -> NDArray[np.float64]:
    """BH-adjusted p-values (R ``p.adjust(method = "BH")``) over ``n_tests`` tests (default ``len(p)``)."""
    pv = np.asarray(p, dtype=float)
    nt = pv.size if n_tests is None else n_tests
    if pv.size == 0:
        return pv.copy()
    order = np.argsort(pv, kind="stable")
    scaled = pv[order] * nt / np.arange(1, pv.size + 1)
    # Step-up: the adjusted value of rank k is the smallest scaled value at any rank >= k.
    adj = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty_like(adj)
    out[order] = np.minimum(adj, 1.0)
    return out


@dataclass(frozen=True)
class SVNResult:
    """Per-pair counts, p-values and decisions; all arrays are ``(|F|, |D|)``.

    Attributes:
        N: Number of interviews (all of them).
        N_f: Interviews with each finding, ``(|F|,)``.
        N_d: Interviews with each diagnosis, ``(|D|,)``.
        N_fd: Co-occurrence counts.
        p_over: Over-expression p, ``P(X >= N_fd)``.
        p_under: Under-expression p, ``P(X <= N_fd)``.
        p_bh: BH-adjusted over-expression p over ``n_tests`` (1 for untested pairs).
        n_tests: ``N_t`` under ``n_tests_convention``.
        alpha: Family-wise (Bonferroni) and FDR (BH) level.
        n_tests_convention: One of ``N_TESTS`` (module docstring).
        tested: Which pairs were tested (all of them under ``all_pairs``).
        bonferroni: ``p_over < alpha / n_tests``.
        bh: BH step-up decisions at ``alpha`` over ``n_tests``.
    """

    N: int
    N_f: NDArray[np.int64]
    N_d: NDArray[np.int64]
    N_fd: NDArray[np.int64]
    p_over: NDArray[np.float64]
    p_under: NDArray[np.float64]
    p_bh: NDArray[np.float64]
    n_tests: int
    alpha: float
    bonferroni: NDArray[np.bool_]
    bh: NDArray[np.bool_]
    n_tests_convention: str = "all_pairs"
    tested: NDArray[np.bool_] | None = None

    def validated(self, method: str) -> NDArray[np.bool_]:
        """The validated links for ``method`` (``bonferroni`` or ``bh``)."""
        if method not in METHODS:
            raise ValueError(f"unknown validation method {method!r}; expected one of {METHODS}")
        return self.bonferroni if method == "bonferroni" else self.bh


def hypergeom_p(
    N: int, N_f: ArrayLike, N_d: ArrayLike, N_fd: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Over- and under-expression p-values ``(P(X >= N_fd), P(X <= N_fd))``; symmetric in f and d.

    scipy's argument order is (k, M = population, n = successes, N = draws): ``sf(k - 1)`` is ``P(X >= k)``.
    """
    k = np.asarray(N_fd)
    over = hypergeom.sf(k - 1, N, N_f, N_d)
    under = hypergeom.cdf(k, N, N_f, N_d)
    return np.asarray(over, dtype=float), np.asarray(under, dtype=float)


def min_attainable_p(N: int, N_f: ArrayLike, N_d: ArrayLike) -> NDArray[np.float64]:
    """The smallest over-expression p a pair can reach, ``P(X >= min(N_f, N_d))`` (1 when either is 0)."""
    nf, nd = np.broadcast_arrays(np.asarray(N_f), np.asarray(N_d))
    k = np.minimum(nf, nd)
    p = np.asarray(hypergeom.sf(k - 1, N, nf, nd), dtype=float)
    return np.where(k > 0, p, 1.0)


def tarone_k(p_min: ArrayLike, alpha: float) -> int:
    """Tarone's correction factor: the smallest ``K >= 1`` with ``#{p_min <= alpha / K} <= K``."""
    pm = np.sort(np.asarray(p_min, dtype=float).ravel())
    for k in range(1, pm.size + 1):
        if int(np.searchsorted(pm, alpha / k, side="right")) <= k:
            return k
    return max(int(pm.size), 1)


def count_tests(
    convention: str, N: int, N_f: ArrayLike, N_d: ArrayLike, N_fd: ArrayLike, alpha: float
) -> tuple[int, NDArray[np.bool_]]:
    """``(N_t, tested)`` under ``convention`` (module docstring); ``tested`` has the shape of ``N_fd``."""
    C = np.asarray(N_fd)
    if convention == "all_pairs":
        return int(C.size), np.ones(C.shape, dtype=bool)
    if convention == "cooccurring":
        tested = C > 0
        return int(tested.sum()), tested
    if convention == "tarone":
        p_min = min_attainable_p(N, np.asarray(N_f)[:, None], np.asarray(N_d)[None, :])
        k = tarone_k(p_min, alpha)
        return k, p_min <= alpha / k
    raise ValueError(f"unknown n_tests convention {convention!r}; expected one of {N_TESTS}")


def svn_links(F: ArrayLike, D: ArrayLike, alpha: float = 0.01, n_tests: str = "all_pairs") -> SVNResult:
    """Validates every finding–diagnosis pair against the hypergeometric null.

    Args:
        F: Interview × finding incidence (non-zero = present; binarised here).
        D: Interview × diagnosis incidence (same rows as ``F``).
        alpha: Level for both Bonferroni and BH.
        n_tests: The ``N_t`` convention, one of ``N_TESTS`` (module docstring).

    Returns:
        The counts, p-values and both decisions over ``N_t`` tests.
    """
    Fb = np.asarray(F) != 0
    Db = np.asarray(D) != 0
    if Fb.shape[0] != Db.shape[0]:
        raise ValueError(f"F has {Fb.shape[0]} interviews but D has {Db.shape[0]}")
    N = int(Fb.shape[0])
    N_f = Fb.sum(axis=0).astype(np.int64)
    N_d = Db.sum(axis=0).astype(np.int64)
    N_fd = (Fb.astype(np.int64).T @ Db.astype(np.int64)).astype(np.int64)
    p_over, p_under = hypergeom_p(N, N_f[:, None], N_d[None, :], N_fd)
    nt, tested = count_tests(n_tests, N, N_f, N_d, N_fd, alpha)
    p_bh = np.ones(p_over.shape)
    bh = np.zeros(p_over.shape, dtype=bool)
    if tested.any():
        p_bh[tested] = bh_adjust(p_over[tested], nt)
        bh[tested] = bh_reject(p_over[tested], alpha, nt)
    return SVNResult(
        N=N,
        N_f=N_f,
        N_d=N_d,
        N_fd=N_fd,
        p_over=p_over,
        p_under=p_under,
        p_bh=p_bh,
        n_tests=nt,
        alpha=alpha,
        bonferroni=tested & (p_over < alpha / max(nt, 1)),
        bh=bh,
        n_tests_convention=n_tests,
        tested=tested,
    )
