"""Bootstrap confidence interval of a mean: the one implementation every report and comparison uses.

Built on ``scipy.stats.bootstrap``, resampling the values (questions, interviews, or per-pair differences)
with replacement from a generator seeded by the caller, so a seed gives the same interval on every run.

The interval is **BCa** (bias-corrected and accelerated) where it is defined: the means we report are of
bounded, often skewed data (accuracies near 0 or 1, 0/1 flips, differences of scores), where the plain
percentile interval is biased and BCa is second-order accurate. BCa needs a bias correction (the share of
resampled means below the observed mean) and an acceleration (from the jackknife); both are undefined when
every value is equal, and the correction is infinite when no resample falls on one side of the observed mean
(a handful of values or of resamples). scipy then warns and returns NaN; we fall back to the **percentile**
interval of the same resamples and record why on the result (``BootstrapCI.reason``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import bootstrap


@dataclass(frozen=True)
class BootstrapCI:
    """An interval of the mean, the method that produced it, and why it is not BCa (None when it is)."""

    low: float
    high: float
    method: Literal["BCa", "percentile", "exact"]
    reason: str | None = None


def bootstrap_interval(
    values: Sequence[float], samples: int = 10_000, seed: int = 0, level: float = 0.95
) -> BootstrapCI:
    """Bootstrap interval of the mean of ``values`` (module docstring).

    Args:
        values: One number per resampled unit (0/1 outcomes, scores, or paired differences).
        samples: Number of bootstrap resamples.
        seed: Seed of the resampling generator; the same seed gives the same interval.
        level: Confidence level of the two-sided interval.

    Returns:
        ``(0, 0)`` with method ``exact`` for no values (reports show an empty arm as 0, not NaN); the value
        itself when all values are equal (nothing to resample); else BCa, or percentile when BCa is undefined.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return BootstrapCI(0.0, 0.0, "exact", "no values")
    if np.all(x == x[0]):
        v = float(x[0])
        return BootstrapCI(v, v, "exact", "all values equal")
    # Recorded, not raised: a degenerate BCa (DegenerateDataWarning, or a 0/0 in its adjustment) is the
    # cue for the fallback below, and its message is the recorded reason.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = bootstrap(
            (x,),
            np.mean,
            n_resamples=samples,
            confidence_level=level,
            method="BCa",
            rng=np.random.default_rng(seed),
        )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if math.isfinite(lo) and math.isfinite(hi):
        for w in caught:  # unrelated to degeneracy: let the caller's filters see them
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return BootstrapCI(lo, hi, "BCa")
    reason = "BCa undefined: " + (
        "; ".join(dict.fromkeys(str(w.message) for w in caught)) or "non-finite bound"
    )
    # Reuses the resamples drawn above (n_resamples=0 draws none), so the fallback stays seeded.
    pct = bootstrap(
        (x,),
        np.mean,
        n_resamples=0,
        confidence_level=level,
        method="percentile",
        bootstrap_result=res,
        rng=np.random.default_rng(seed),
    )
    return BootstrapCI(
        float(pct.confidence_interval.low), float(pct.confidence_interval.high), "percentile", reason
    )


def bootstrap_ci(
    values: Sequence[float], samples: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """``(low, high)`` of ``bootstrap_interval`` (same arguments), for tables that carry only the bounds."""
    ci = bootstrap_interval(values, samples, seed, level)
    return ci.low, ci.high
