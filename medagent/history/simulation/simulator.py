"""The LLM patient grounded in one real interview, and the judge that measures its fidelity.

**Simulator.** The patient sees the interview's visible turns (``reference.visible_turns``: the physician's
closing statement excluded) as delimited DATA and answers each question in the first person, only what is
asked, from facts in that interview, saying it does not know otherwise. With ``simulator_exchanges`` = k
(the CPU default: a whole transcript does not fit a 4k-token request) it is shown the first exchange (the
presenting complaint) and the k exchanges most similar to the question by embedding cosine; with None,
the whole interview (cut at ``max_transcript_chars``). The last few simulated exchanges go with each
request so answers stay consistent. Every answer is logged with the context it was given.

**Fidelity.** An LLM judge labels each logged answer against the source lines relevant to the question and
the answer (picked afresh, not the simulator's context) as ``supported`` (every stated
fact is in the source, or it says it does not know and the source is silent), ``contradicts`` (a stated
fact disagrees with the source) or ``beyond_source`` (it states facts the source does not contain);
an unusable judge reply is ``invalid``. The report gives each label's share. ``medagent.history.evaluation.fidelity``
measures the same without a model, finding by finding (polarity, disclosure).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Annotated

import numpy as np
from pydantic import BeforeValidator, field_validator

from medagent.config import InterviewEvalConfig
from medagent.history.agent.redundancy import TextEmbedder, cosine_matrix
from medagent.history.simulation.reference import exchanges, render_turns
from medagent.interview.types import Turn
from medagent.llm.base import ChatModel
from medagent.llm.structured import Output, ask, capped_str, enum_str
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt

FIDELITY_LABELS = ("supported", "contradicts", "beyond_source")
HISTORY_EXCHANGES = 4
DONT_KNOW = "I'm not sure."


@dataclass(frozen=True)
class SimulatedExchange:
    """One answered question; ``source_turns``: the transcript turns it drew on (the turns a replayed answer
    is made of; the turns of the facts the fact patient was shown)."""

    question: str
    answer: str
    context: str
    source_turns: tuple[int, ...] = ()


@dataclass
class PatientSimulator:
    """An LLM patient (module docstring); satisfies ``agent.Patient``.

    Args:
        llm: Any ``ChatModel``.
        turns: The visible turns of the source interview.
        cfg: Context size, sampling.
        embedder: Picks the relevant exchanges; required when ``cfg.simulator_exchanges`` is set.
    """

    llm: ChatModel
    turns: Sequence[Turn]
    cfg: InterviewEvalConfig
    embedder: TextEmbedder | None = None
    log: list[SimulatedExchange] = field(default_factory=list)
    calls: UsageRecord = field(default_factory=lambda: UsageRecord.calls(by_tag=True))

    def __post_init__(self) -> None:
        self._exchanges = exchanges(list(self.turns))
        # The presenting complaint, quoted on its own: the 1.5B CPU model answered "why did you come?"
        # with "not sure" while the complaint sat in the source block; named, it is used.
        self._complaint = next((t.text for t in self.turns if t.speaker == "patient"), "")
        self._vectors: np.ndarray | None = None
        if self.cfg.simulator_exchanges is not None and self.embedder is None:
            raise ValueError(
                "simulator_exchanges needs an embedder (or set it to null for the full transcript)"
            )

    def context_for(self, question: str) -> str:
        """The part of the source interview shown for ``question``."""
        k = self.cfg.simulator_exchanges
        if k is None or len(self._exchanges) <= k + 1:
            return render_turns(list(self.turns))[: self.cfg.max_transcript_chars]
        assert self.embedder is not None
        if self._vectors is None:
            self._vectors = np.asarray(self.embedder.encode(self._exchanges), dtype=np.float32)
        q = np.asarray(self.embedder.encode([question]), dtype=np.float32)
        sims = cosine_matrix(q, self._vectors)[0]
        sims[0] = np.inf  # the presenting complaint always goes first
        keep = sorted(np.argsort(-sims, kind="stable")[: k + 1].tolist())
        return "\n...\n".join(self._exchanges[i] for i in keep)

    async def answer(self, question: str) -> str:
        context = self.context_for(question)
        messages = load_prompt("history_patient").render(
            source=context,
            complaint=self._complaint[: self.cfg.max_transcript_chars],
            history=[asdict(x) | {"context": ""} for x in self.log[-HISTORY_EXCHANGES:]],
            question=question,
        )
        resp = await self.llm.chat(
            messages,
            temperature=self.cfg.simulator_temperature,
            max_tokens=self.cfg.simulator_max_tokens,
            prompt="history_patient",
        )
        self.calls.add(resp.usage, resp.latency_s, "patient")
        text = " ".join(resp.content.split()).removeprefix("Patient:").removeprefix("You:").strip()
        if not text:
            self.calls.errors.append(f"simulator: empty reply to {question[:60]!r}; answered {DONT_KNOW!r}")
            text = DONT_KNOW
        self.log.append(SimulatedExchange(question, text, context))
        return text


class FidelityVerdict(Output):
    """The ``history_fidelity`` reply: a label (the rationale is asked for, but not needed to read one)."""

    label: enum_str(FIDELITY_LABELS)  # type: ignore[valid-type]
    rationale: Annotated[capped_str(200), BeforeValidator(str)] = ""  # type: ignore[valid-type]

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        if value not in FIDELITY_LABELS:
            raise ValueError(f"'label' must be one of {FIDELITY_LABELS}, got {value[:40]!r}")
        return value


class FidelityJudge:
    """Labels simulator answers against the source (module docstring).

    Args:
        source: The visible turns of the source interview. Given (with ``embedder``), the judge reads the
            presenting complaint plus the ``simulator_exchanges`` exchanges most similar to the question
            *and the answer*, picked afresh: what the answer claims is checked against the lines that
            speak to it, even where the simulator was shown other ones. Without it, the simulator's own
            context is used.
    """

    def __init__(
        self,
        llm: ChatModel,
        cfg: InterviewEvalConfig,
        *,
        json_schema: bool = True,
        source: Sequence[Turn] = (),
        embedder: TextEmbedder | None = None,
    ) -> None:
        self.llm = llm
        self.cfg = cfg
        self.json_schema = json_schema
        self._source = (
            PatientSimulator(llm, source, cfg, embedder)
            if source and (embedder is not None or cfg.simulator_exchanges is None)
            else None
        )

    def context_for(self, exchange: SimulatedExchange) -> str:
        """The source lines the judge reads for one exchange."""
        if self._source is None:
            return exchange.context
        return self._source.context_for(f"{exchange.question} {exchange.answer}")

    async def judge(self, exchange: SimulatedExchange, log: UsageRecord) -> str:
        """``supported``, ``contradicts``, ``beyond_source`` or ``invalid``."""
        reply = await ask(
            self.llm,
            load_prompt("history_fidelity").render(
                source=self.context_for(exchange), question=exchange.question, answer=exchange.answer
            ),
            FidelityVerdict,
            prompt="history_fidelity",
            schema_name="fidelity",
            json_schema_ok=self.json_schema,
            tag="fidelity judge",
            usage=log,
            max_tokens=self.cfg.judge_max_tokens,
            max_retries=1,
        )
        return reply.value.label if reply.value else "invalid"

    async def judge_all(self, log_: Sequence[SimulatedExchange], calls: UsageRecord) -> list[str]:
        return [await self.judge(x, calls) for x in log_]


def fidelity_shares(labels: Sequence[str]) -> dict[str, float]:
    """Share of each label (and ``invalid``) among judged answers; empty input gives {}."""
    if not labels:
        return {}
    counts = Counter(labels)
    return {k: counts.get(k, 0) / len(labels) for k in (*FIDELITY_LABELS, "invalid")}
