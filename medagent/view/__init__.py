"""A read-only results browser over run directories (``python -m pipelines.view RUN_DIR...``).

``runs`` loads and summarises run directories, ``questions`` and ``interviews`` shape what the page shows,
``paths`` confines every file read to the runs given, and ``app`` is the web app with its static page.
"""

from medagent.view.app import build_app
from medagent.view.runs import ViewRun, load_view

__all__ = ["ViewRun", "build_app", "load_view"]
