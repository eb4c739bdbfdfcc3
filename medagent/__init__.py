"""medagent: evidence-grounded medical QA and history-taking agents.

The library imports without Ray or a GPU; Ray actors and Serve deployments live in ``actors/`` and
entry points in ``pipelines/``.
"""

__version__ = "0.1.0"
