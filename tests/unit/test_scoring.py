import pytest

from medagent.eval import bootstrap_ci, format_table, score
from medagent.types import INVALID, Gold, Prediction


def _p(i: str, a: str, error: str | None = None) -> Prediction:
    return Prediction(id=i, benchmark="t", answer=a, error=error)


GOLDS = {k: Gold(id=k, answer="A") for k in ["1", "2", "3", "4", "5"]}


def test_invalid_and_errors_count_as_wrong_and_are_reported() -> None:
    preds = [
        _p("1", "A"),
        _p("2", "A"),
        _p("3", INVALID),
        _p("4", INVALID, error="LLMError: down"),
        _p("1", "B"),
    ]
    m = score(preds, GOLDS, benchmark="t", rejected=2)
    assert (m.n, m.correct) == (4, 2)
    assert m.accuracy == pytest.approx(0.5)
    assert m.invalid_rate == pytest.approx(0.25)
    assert m.error_rate == pytest.approx(0.25)
    assert m.missing == 1 and m.rejected == 2
    assert 0.0 <= m.ci95[0] <= m.accuracy <= m.ci95[1] <= 1.0


def test_predictions_without_gold_are_ignored() -> None:
    m = score([_p("x", "A"), _p("1", "A")], GOLDS, benchmark="t")
    assert m.n == 1 and m.accuracy == 1.0


def test_bootstrap_is_deterministic_and_degenerate_cases() -> None:
    outcomes = [1, 0, 1, 1, 0, 1, 0, 1]
    assert bootstrap_ci(outcomes, 500, seed=3) == bootstrap_ci(outcomes, 500, seed=3)
    assert bootstrap_ci([1] * 10) == (1.0, 1.0)
    assert bootstrap_ci([]) == (0.0, 0.0)


def test_table_mentions_every_metric() -> None:
    m = score([_p("1", "A")], GOLDS, benchmark="medqa")
    table = format_table([m])
    for word in ("benchmark", "accuracy", "95% CI", "invalid", "errors", "rejected", "medqa"):
        assert word in table
