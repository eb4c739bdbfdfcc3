"""Benchmark data: a registry of loaders plus one shared validator.

Importing this package registers the built-in benchmarks (``medagent.data.loaders``).
"""

from __future__ import annotations

from medagent.data import loaders as _loaders  # noqa: F401  (registers the built-in benchmarks)
from medagent.data import paper as _paper  # noqa: F401  (the QA paper's item sets)
from medagent.data.registry import (
    BenchmarkData,
    list_benchmarks,
    load_benchmark,
    register_benchmark,
    resolve_data_root,
)

__all__ = ["BenchmarkData", "list_benchmarks", "load_benchmark", "register_benchmark", "resolve_data_root"]
