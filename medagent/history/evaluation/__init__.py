"""Scoring history-taking runs: the per-interview runner, metrics, paired statistics and the report."""
