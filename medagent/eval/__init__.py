"""Evaluation: the one scoring path that joins predictions to gold labels."""

from medagent.eval.open_ended import OpenScorer, TextScorer, score_open_ended
from medagent.eval.scoring import BenchmarkMetrics, format_table, question_outcomes, score
from medagent.eval.stats import BootstrapCI, bootstrap_ci, bootstrap_interval

__all__ = [
    "BenchmarkMetrics",
    "BootstrapCI",
    "OpenScorer",
    "TextScorer",
    "bootstrap_ci",
    "bootstrap_interval",
    "format_table",
    "question_outcomes",
    "score",
    "score_open_ended",
]
