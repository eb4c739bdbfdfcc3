"""Paired statistics of a multi-arm run: sign-flip permutation p, t interval, Holm, arms on shared ids."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import t as student_t

from medagent.history.evaluation.paired import (
    arms_comparison,
    arms_markdown,
    holm,
    sign_flip_p,
    t_interval,
)
from tests.unit.test_history_comparison import _rec


def test_sign_flip_p_is_exact_for_small_n() -> None:
    # All 8 differences positive: only the all-plus and all-minus sign vectors reach the observed |mean|.
    assert sign_flip_p([1.0] * 8) == pytest.approx(2 / 256)
    assert sign_flip_p([1.0, -1.0]) == 1.0
    assert sign_flip_p([]) is None
    big = sign_flip_p(list(np.linspace(0.1, 1.0, 30)), n_perm=2000, seed=1)
    assert big is not None and 1 / 2001 <= big < 0.01


def test_t_interval_matches_the_formula() -> None:
    d = [0.1, 0.3, -0.2, 0.4, 0.0]
    lo, hi = t_interval(d)
    half = student_t.ppf(0.975, 4) * np.std(d, ddof=1) / np.sqrt(5)
    assert lo == pytest.approx(np.mean(d) - half) and hi == pytest.approx(np.mean(d) + half)
    assert t_interval([1.0]) == (None, None)


def test_holm_steps_down_and_keeps_order() -> None:
    assert holm([0.01, 0.04, None, 0.03]) == [
        pytest.approx(0.03),
        pytest.approx(0.06),
        None,
        pytest.approx(0.06),
    ]
    assert holm([0.5, 0.9]) == [1.0, 1.0]  # 2 x 0.5, capped at 1; never below an earlier step


def test_arms_comparison_pairs_on_shared_interviews_with_holm() -> None:
    ids = [f"RES{i:04d}" for i in range(10)]
    base = [_rec(i, bertscore_f1=0.5, n_turns=1) for i in ids]
    better = [_rec(i, bertscore_f1=0.6 + 0.01 * k, n_turns=16) for k, i in enumerate(ids)]
    same = [_rec(i, bertscore_f1=0.5 + (0.01 if k % 2 else -0.01), n_turns=1) for k, i in enumerate(ids)]
    same = [replace(r, error="endpoint") if r.interview_id == ids[0] else r for r in same]
    rows = arms_comparison(
        {"single_shot": base, "amq": better, "amq_physician": same}, ["bertscore_f1"], "single_shot"
    )
    by_arm = {r.arm_b: r for r in rows}
    assert by_arm["amq"].n == 10 and by_arm["amq_physician"].n == 9  # the failed interview drops out
    assert by_arm["amq"].perm_p == pytest.approx(2 / 1024) and by_arm["amq"].holm_p == pytest.approx(4 / 1024)
    assert by_arm["amq_physician"].holm_p is not None and by_arm["amq_physician"].holm_p > 0.5
    assert "Holm p" in arms_markdown(rows)
    with pytest.raises(ValueError, match="not fields"):
        arms_comparison({"single_shot": base, "amq": better}, ["fact_recall"], "single_shot")
