"""The fact patient: a model that answers only from the case's facts retrieved for the question.

As MediQ's patient answers from a vignette's atomic facts: the ``k`` facts of the interview's fact set
(``medagent.history.facts``) closest to the question by embedding cosine (over "statement: quote") go to
the model as DATA with the ``history_fact_patient`` prompt, which tells it to answer in the first person
from those facts only and to say ``replay.NO_ANSWER`` when none answers. It never sees the transcript, so
it can only state what a quote of the patient backs. Every answer is logged with the facts it was shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from medagent.history.agent.redundancy import TextEmbedder, cosine_matrix
from medagent.history.facts.store import Fact, FactSet
from medagent.history.simulation.replay import NO_ANSWER
from medagent.history.simulation.simulator import SimulatedExchange
from medagent.llm.base import ChatModel
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt

PROMPT = "history_fact_patient"


@dataclass
class FactPatient:
    """Answers from retrieved facts (module docstring); satisfies ``agent.Patient``.

    Args:
        llm: The patient's model.
        facts: The interview's fact set.
        embedder: Ranks the facts against the question.
        k: Facts shown per question.
        max_tokens: Answer length cap.
        temperature: Sampling temperature (0: deterministic where the backend allows).
    """

    llm: ChatModel
    facts: FactSet
    embedder: TextEmbedder
    k: int = 6
    max_tokens: int = 96
    temperature: float = 0.0
    log: list[SimulatedExchange] = field(default_factory=list)
    calls: UsageRecord = field(default_factory=lambda: UsageRecord.calls(by_tag=True))

    def __post_init__(self) -> None:
        self._vectors: np.ndarray | None = None

    def retrieve(self, question: str) -> list[Fact]:
        """The ``k`` facts closest to ``question``, in transcript order."""
        facts = self.facts.facts
        if len(facts) <= self.k:
            return list(facts)
        if self._vectors is None:
            texts = [f"{f.statement}: {f.quote}" for f in facts]
            self._vectors = np.asarray(self.embedder.encode(texts), dtype=np.float32)
        q = np.asarray(self.embedder.encode([question]), dtype=np.float32)
        sims = cosine_matrix(q, self._vectors)[0]
        keep = sorted(np.argsort(-sims, kind="stable")[: self.k].tolist())
        return [facts[i] for i in keep]

    async def answer(self, question: str) -> str:
        shown = self.retrieve(question)
        if not shown:
            self.log.append(SimulatedExchange(question, NO_ANSWER, "no facts"))
            return NO_ANSWER
        resp = await self.llm.chat(
            load_prompt(PROMPT).render(facts=shown, question=question),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            prompt=PROMPT,
        )
        self.calls.add(resp.usage, resp.latency_s, "patient")
        text = " ".join(resp.content.split()).removeprefix("Patient:").strip()
        if not text:
            self.calls.errors.append(
                f"fact patient: empty reply to {question[:60]!r}; answered {NO_ANSWER!r}"
            )
            text = NO_ANSWER
        context = "\n".join(f"{f.id}: {f.statement} ({f.quote})" for f in shown)
        self.log.append(SimulatedExchange(question, text, context, tuple(sorted({f.turn for f in shown}))))
        return text
