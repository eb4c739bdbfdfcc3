"""Run directories: one per run, resumable, with a manifest beside predictions, traces and metrics."""

from medagent.run.drift import ConfigDriftError, check_resume, config_drift
from medagent.run.manifest import build_manifest
from medagent.run.rundir import RunDir

__all__ = ["ConfigDriftError", "RunDir", "build_manifest", "check_resume", "config_drift"]
