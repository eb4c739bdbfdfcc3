"""medagent's custom Prometheus metrics, through ``ray.util.metrics``.

Every Ray process (driver, Ray Data actors, Serve replicas) exports what it records to its node's metrics
agent; Prometheus scrapes ``http://<node>:<metrics_export_port>/metrics`` and sees each metric with a
``ray_`` prefix (counters also get ``_total``): ``medagent_questions`` is ``ray_medagent_questions_total``.
Ray adds ``SessionName``, ``NodeAddress`` and ``WorkerId`` labels, so series from different actors never
collide and dashboards sum them.

Accuracy so far is a ratio of counters (``status="correct"`` over all questions), not a gauge: Ray's
metrics agent forgets a gauge value ~20 s after its process last set it (its gauge TTL), so a gauge set
when a prediction arrives would blink out between slow predictions and vanish when the run ends, while
counters keep their cumulative value. The dashboard divides the two; so can any alert or recording rule.

``SPECS`` is the one list of metrics (the Grafana dashboard test checks its queries against it). Metric
objects are created lazily, once per process, and only while Ray is initialised: without Ray (unit tests,
library use) ``meters()`` hands back a no-op instance, so call sites are one unconditional line. Recording
is a few microseconds (Ray aggregates in-process and exports every few seconds), cheap enough for the
retrieve route.

Where each metric is recorded:
    questions (with accuracy)   driver, ``pipelines.benchmark_run`` (``RunMeter``: golds live only there)
    tool_calls, memory_bank     ``actors.agent_worker`` (from the prediction's trace and the memory bank)
    llm_latency, llm_tokens     ``MeteredChatModel``, wrapped round every worker's LLM client
    retrieval_latency           ``actors.retrieval_servers.RetrieverServer`` (each search request)
    interviews                  ``actors.interview_worker``
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from medagent.agent.tools import SPECS as TOOL_SPECS
from medagent.eval.scoring import question_outcomes
from medagent.llm.base import ChatModel, ChatResponse
from medagent.types import INVALID, Gold, Prediction

if TYPE_CHECKING:
    from medagent.agent.memory import MemoryBank
    from medagent.run import RunDir

PREFIX = "medagent_"
# Seconds: a CPU 135M model answers in ~0.1 s, the CPU 1.5B model takes up to minutes per agent turn.
LLM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0)
# Seconds: a cached-encoder FAISS search is milliseconds; a busy 2-core node queues them for seconds.
RETRIEVAL_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Entries kept per question: bounded by top_r (32 in the paper) plus the quotes taken from them.
MEMORY_BUCKETS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)


@dataclass(frozen=True)
class MetricSpec:
    """One metric: ``kind`` is ``counter`` or ``histogram`` (which needs ``boundaries``); no gauges (see
    the module docstring)."""

    name: str
    kind: str
    description: str
    tag_keys: tuple[str, ...] = ()
    boundaries: tuple[float, ...] = ()

    def exported(self) -> tuple[str, ...]:
        """The Prometheus series names Ray's exporter writes for this metric."""
        base = "ray_" + self.name
        if self.kind == "counter":
            return (base + "_total",)
        return (base + "_bucket", base + "_sum", base + "_count")


SPECS: dict[str, MetricSpec] = {
    s.name: s
    for s in (
        MetricSpec(
            PREFIX + "questions",
            "counter",
            "Questions answered, by outcome: correct, wrong, invalid (no parseable answer), error (an "
            "endpoint failed) or ungraded (no gold label). Accuracy = correct / all, as score() counts it.",
            ("benchmark", "agent", "status"),
        ),
        MetricSpec(
            PREFIX + "tool_calls",
            "counter",
            "Tool calls the agent made, by tool (unknown names as 'other') and whether they ran.",
            ("tool", "ok"),
        ),
        MetricSpec(
            PREFIX + "llm_latency_seconds",
            "histogram",
            "Wall time of one LLM request as its caller saw it.",
            ("model",),
            LLM_BUCKETS,
        ),
        MetricSpec(PREFIX + "llm_tokens", "counter", "LLM tokens, by kind.", ("model", "kind")),
        MetricSpec(
            PREFIX + "retrieval_latency_seconds",
            "histogram",
            "Time of one search request inside the Retriever replica (batching wait included).",
            (),
            RETRIEVAL_BUCKETS,
        ),
        MetricSpec(
            PREFIX + "memory_bank_size",
            "histogram",
            "Entries in a question's memory bank when it is answered (quotes kept + documents in context).",
            ("agent",),
            MEMORY_BUCKETS,
        ),
        MetricSpec(
            PREFIX + "interviews",
            "counter",
            "History-taking interviews evaluated, by outcome: ok, error or skipped.",
            ("mode", "status"),
        ),
    )
}


def exported_names() -> set[str]:
    """Every Prometheus series name our metrics produce (``ray_medagent_...``)."""
    return {n for s in SPECS.values() for n in s.exported()}


class _NullMetric:
    """Stands in for a Ray metric outside Ray: accepts every record and keeps nothing."""

    def inc(self, value: float = 1.0, tags: Mapping[str, str] | None = None) -> None:
        pass

    def observe(self, value: float, tags: Mapping[str, str] | None = None) -> None:
        pass


def ray_metric(spec: MetricSpec) -> Any:
    """A ``ray.util.metrics`` object for ``spec``."""
    from ray.util import metrics as rm

    if spec.kind == "counter":
        return rm.Counter(spec.name, spec.description, tag_keys=spec.tag_keys)
    return rm.Histogram(spec.name, spec.description, boundaries=list(spec.boundaries), tag_keys=spec.tag_keys)


def status_of(pred: Prediction, outcome: int | None) -> str:
    """``error`` (an endpoint failed), ``invalid`` (no parseable answer), else ``correct`` or ``wrong``
    from ``outcome`` (1 or 0, ``medagent.eval.scoring.question_outcomes``); ``ungraded`` without a gold."""
    if pred.error:
        return "error"
    if pred.answer == INVALID:
        return "invalid"
    if outcome is None:
        return "ungraded"
    return "correct" if outcome else "wrong"


def tool_tag(name: str) -> str:
    """The tool name as a label: names the model invented collapse into ``other`` (bounded cardinality)."""
    return name if name in TOOL_SPECS else "other"


class Meters:
    """Records our metrics from our own objects; ``factory`` makes one metric object per spec."""

    def __init__(self, factory: Callable[[MetricSpec], Any]) -> None:
        self._m = {name: factory(spec) for name, spec in SPECS.items()}

    def questions(self, statuses: Iterable[str], benchmark: str, agent: str) -> None:
        for status in statuses:
            tags = {"benchmark": benchmark, "agent": agent, "status": status}
            self._m[PREFIX + "questions"].inc(1, tags=tags)

    def tool_calls(self, pred: Prediction) -> None:
        """One count per ``tool`` step of the trace (refused calls included, labelled ``ok="false"``)."""
        for step in pred.trace:
            if step.get("kind") == "tool":
                tags = {"tool": tool_tag(str(step.get("tool", ""))), "ok": str(bool(step.get("ok"))).lower()}
                self._m[PREFIX + "tool_calls"].inc(1, tags=tags)

    def llm_call(self, resp: ChatResponse, model: str) -> None:
        self._m[PREFIX + "llm_latency_seconds"].observe(resp.latency_s, tags={"model": model})
        tokens = self._m[PREFIX + "llm_tokens"]
        # Counter.inc refuses 0: a backend that reports no usage adds nothing.
        if resp.usage.prompt_tokens > 0:
            tokens.inc(resp.usage.prompt_tokens, tags={"model": model, "kind": "prompt"})
        if resp.usage.completion_tokens > 0:
            tokens.inc(resp.usage.completion_tokens, tags={"model": model, "kind": "completion"})

    def retrieval(self, seconds: float) -> None:
        self._m[PREFIX + "retrieval_latency_seconds"].observe(seconds)

    def memory_bank(self, bank: MemoryBank, agent: str) -> None:
        size = len(bank.evidence) + len(bank.unverified) + len(bank.in_context)
        self._m[PREFIX + "memory_bank_size"].observe(size, tags={"agent": agent})

    def interview(self, row: Mapping[str, Any]) -> None:
        status = "error" if row.get("error") else "skipped" if row.get("skipped") else "ok"
        self._m[PREFIX + "interviews"].inc(1, tags={"mode": str(row.get("mode", "")), "status": status})


_NULL = Meters(lambda spec: _NullMetric())
_process_meters: Meters | None = None
_lock = threading.Lock()


def meters() -> Meters:
    """This process's Ray-backed ``Meters`` once Ray is initialised; a no-op instance before that.

    Only the Ray-backed instance is cached, so a driver that records before ``ray.init`` still exports
    everything it records afterwards.
    """
    global _process_meters
    if _process_meters is not None:
        return _process_meters
    ray = sys.modules.get("ray")  # never import Ray just to find out it is not running
    if ray is None or not ray.is_initialized():
        return _NULL
    with _lock:
        if _process_meters is None:
            _process_meters = Meters(ray_metric)
    return _process_meters


class MeteredChatModel:
    """A ``ChatModel`` that records each call's latency and tokens, then returns the response unchanged.

    The library's clients know nothing of Ray; the actors wrap them here. Other attributes (``model``,
    ``aclose``...) pass through to the wrapped client.
    """

    def __init__(self, inner: ChatModel, model: str) -> None:
        self.inner = inner
        self.model_tag = model

    async def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResponse:
        resp = await self.inner.chat(messages, **kwargs)
        meters().llm_call(resp, self.model_tag)
        return resp

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copy/unpickle): no recursion through ``self.inner``
            raise AttributeError(name)
        return getattr(self.inner, name)


class RunMeter:
    """Driver-side count of one benchmark run's questions by outcome (accuracy so far follows from it).

    Lives in the driver because grading needs the gold labels, which never reach a worker; counting here
    also counts each question once, where the run dir commits it (a retried Ray Data batch, or a question
    answered before a resume, is not counted again).
    """

    def __init__(
        self, benchmark: str, agent: str, golds: Mapping[str, Gold], done: Iterable[str] = ()
    ) -> None:
        self.benchmark, self.agent, self.golds = benchmark, agent, golds
        self.seen = set(done)

    @classmethod
    def for_run(cls, rd: RunDir, benchmark: str, agent: str) -> RunMeter:
        return cls(benchmark, agent, rd.load_golds(), rd.completed_ids())

    def add(self, preds: list[Prediction]) -> list[str]:
        """Counts the predictions not seen before; returns their statuses."""
        new = [p for p in preds if p.id not in self.seen]
        self.seen.update(p.id for p in new)
        outcomes = question_outcomes(new, self.golds)
        statuses = [status_of(p, outcomes.get(p.id)) for p in new]
        meters().questions(statuses, self.benchmark, self.agent)
        return statuses
