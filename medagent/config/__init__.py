"""Typed configuration: the dataclass schemas behind the hydra config groups in ``conf/``.

Hydra validates every YAML group against these schemas at compose time; pipelines convert the composed
config once at the driver and pass plain dataclasses (or dicts) into actors, never ``DictConfig`` objects
with unresolved interpolations. The schemas live in submodules by pipeline, their closed sets (enums) in ``choices``; import them from here.
"""

from medagent.config.base import (
    BenchmarkConfig,
    ClusterConfig,
    LLMConfig,
    ModelConfig,
    RerankerConfig,
    RetrieverConfig,
    SimNodeConfig,
    to_dataclass,
)
from medagent.config.choices import (
    AnnotatorKind,
    AuthMode,
    Backend,
    Choice,
    Confidence,
    FinalAnswerCall,
    HistoryMode,
    LogLevel,
    Memory,
    PlacementStrategy,
    Policy,
    Priorities,
    ProxyLocation,
    RetrievalMode,
    SummaryContext,
    ToolCalls,
    ToolChoice,
)
from medagent.config.interview import (
    DEFAULT_RED_FLAGS,
    AnnotateRunConfig,
    AnnotatorConfig,
    HistoryAgentConfig,
    InterviewEvalConfig,
    InterviewRunConfig,
    InterviewsConfig,
    InterviewSessionsConfig,
)
from medagent.config.qa import AgentConfig, GateConfig, OpenScoringConfig, RunConfig
from medagent.config.serve import ServeConfig
from medagent.config.suite import SuiteConfig, SuiteRunConfig

__all__ = [
    "AnnotatorKind",
    "AuthMode",
    "Backend",
    "Choice",
    "Confidence",
    "FinalAnswerCall",
    "HistoryMode",
    "LogLevel",
    "Memory",
    "PlacementStrategy",
    "Policy",
    "Priorities",
    "ProxyLocation",
    "RetrievalMode",
    "SummaryContext",
    "ToolCalls",
    "ToolChoice",
    "AgentConfig",
    "GateConfig",
    "AnnotateRunConfig",
    "AnnotatorConfig",
    "BenchmarkConfig",
    "ClusterConfig",
    "DEFAULT_RED_FLAGS",
    "HistoryAgentConfig",
    "InterviewEvalConfig",
    "InterviewRunConfig",
    "InterviewSessionsConfig",
    "InterviewsConfig",
    "LLMConfig",
    "ModelConfig",
    "OpenScoringConfig",
    "RerankerConfig",
    "RetrieverConfig",
    "RunConfig",
    "ServeConfig",
    "SimNodeConfig",
    "SuiteConfig",
    "SuiteRunConfig",
    "to_dataclass",
]
