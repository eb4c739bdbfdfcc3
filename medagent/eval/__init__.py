"""Evaluation: the one scoring path that joins predictions to gold labels."""

from medagent.eval.scoring import BenchmarkMetrics, bootstrap_ci, format_table, score

__all__ = ["BenchmarkMetrics", "bootstrap_ci", "format_table", "score"]
