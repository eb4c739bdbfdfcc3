"""The config of ``pipelines/serve.py``."""

from __future__ import annotations

from dataclasses import dataclass, field

from medagent.config.base import ClusterConfig, LLMConfig, RerankerConfig, RetrieverConfig
from medagent.config.interview import InterviewSessionsConfig


@dataclass
class ServeConfig:
    """What ``pipelines/serve.py`` composes (``conf/serve.yaml``)."""

    llm: LLMConfig = field(default_factory=LLMConfig)
    retriever: RetrieverConfig = field(default_factory=RetrieverConfig)
    reranker: RerankerConfig = field(default_factory=RerankerConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    index_dir: str | None = None
    app_name: str = "medagent"
    block: bool = True
    # The history-taking session routes (/v1/interview/sessions...): off unless enabled.
    interview_sessions: InterviewSessionsConfig = field(default_factory=lambda: InterviewSessionsConfig())
