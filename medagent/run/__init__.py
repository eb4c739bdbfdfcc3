"""Run directories: one per run, resumable, with a manifest beside predictions, traces and metrics."""

from medagent.run.manifest import build_manifest
from medagent.run.rundir import RunDir

__all__ = ["RunDir", "build_manifest"]
