"""Config of ``pipelines/run_suite.py``: every benchmark of one paper table run as one job."""

from __future__ import annotations

from dataclasses import dataclass, field

from medagent.config.qa import RunConfig


@dataclass
class SuiteConfig:
    """Knobs of the suite itself (the ``suite`` node of ``conf/run_suite.yaml``).

    Attributes:
        dir: Where ``suite.json`` and ``report/`` go; None: the deepest folder holding every cell's run dir
            (``outputs/experiments/<name>/<llm>`` for the paper's experiments).
        continue_on_error: A failed cell (error budget exceeded, or its Ray job failed) is recorded and the
            next cell runs; false (the default) stops the suite at the first failed cell.
        report: Write the tables and figures of ``pipelines.report`` over the suite's cells at the end.
        print_report: Print the report's tables after writing them.
        dry_run: Print the cells (their overrides and run dirs) and what is already done; run nothing.
    """

    dir: str | None = None
    continue_on_error: bool = False
    report: bool = True
    print_report: bool = True
    dry_run: bool = False


@dataclass
class SuiteRunConfig(RunConfig):
    """What ``conf/run_suite.yaml`` composes: one cell's ``RunConfig`` (the overrides every cell shares) plus
    the ``suite`` node. A subclass, so that every override ``run_benchmark`` takes is valid here too."""

    suite: SuiteConfig = field(default_factory=SuiteConfig)
