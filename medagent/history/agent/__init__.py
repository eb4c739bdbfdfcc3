"""The history-taking agents at run time: interview state, phases, next-question policy, answer update,
redundancy control, assessment, and the two agents (``amq``, ``single_shot``)."""
