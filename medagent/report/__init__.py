"""Reports over run directories: the QA paper's tables and figures regenerated from predictions, golds and traces."""

from medagent.report.build import Report, ReportOptions, build_report
from medagent.report.loader import Run, RunKey, load_runs

__all__ = ["Report", "ReportOptions", "Run", "RunKey", "build_report", "load_runs"]
