"""The history-taking agents at run time: interview state, phases, next-question policy, answer update,
redundancy control, assessment, and the two agents (``amq``, ``single_shot``), registered with their
capabilities in ``modes``."""

# Importing the agents registers their modes (``modes.HISTORY_MODES``).
from medagent.history.agent import amq, single_shot  # noqa: F401
