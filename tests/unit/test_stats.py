"""The one bootstrap (``medagent.eval.stats``): BCa where defined, percentile with a reason where not."""

import numpy as np
import pytest

from medagent.eval.stats import bootstrap_ci, bootstrap_interval


def test_bca_on_ordinary_data_is_seeded_and_contains_the_mean() -> None:
    x = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1, 0, 1]
    ci = bootstrap_interval(x, 2000, seed=7)
    assert ci.method == "BCa" and ci.reason is None
    assert ci.low <= np.mean(x) <= ci.high
    assert bootstrap_interval(x, 2000, seed=7) == ci
    assert bootstrap_ci(x, 2000, seed=7) == (ci.low, ci.high)


def test_degenerate_data_give_the_value_or_a_percentile_interval_with_a_reason() -> None:
    assert bootstrap_interval([]) == bootstrap_interval([], 10, 1)
    assert bootstrap_interval([]).method == "exact" and bootstrap_ci([]) == (0.0, 0.0)
    assert bootstrap_interval([0.3] * 5).method == "exact" and bootstrap_ci([0.3] * 5) == (0.3, 0.3)
    # Three resamples that all land above the mean: BCa's bias correction is infinite.
    fallbacks = [ci for s in range(30) if (ci := bootstrap_interval([0, 1, 1], 3, s)).method != "BCa"]
    assert fallbacks and all(c.method == "percentile" and c.reason and "BCa" in c.reason for c in fallbacks)
    assert all(np.isfinite([c.low, c.high]).all() and c.low <= c.high for c in fallbacks)


def test_level_widens_the_interval() -> None:
    x = np.random.default_rng(0).normal(size=50).tolist()
    lo90, hi90 = bootstrap_ci(x, 2000, seed=0, level=0.90)
    lo99, hi99 = bootstrap_ci(x, 2000, seed=0, level=0.99)
    assert lo99 < lo90 < np.mean(x) < hi90 < hi99
    assert bootstrap_ci(x, 2000, seed=0) != pytest.approx(bootstrap_ci(x, 2000, seed=1))
