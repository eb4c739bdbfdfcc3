"""Evaluation: the one scoring path that joins predictions to gold labels."""

from medagent.eval.open_ended import OpenScorer, TextScorer, score_open_ended
from medagent.eval.scoring import BenchmarkMetrics, bootstrap_ci, format_table, question_outcomes, score

__all__ = [
    "BenchmarkMetrics",
    "OpenScorer",
    "TextScorer",
    "bootstrap_ci",
    "format_table",
    "question_outcomes",
    "score",
    "score_open_ended",
]
