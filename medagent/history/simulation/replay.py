"""The replay patient: the real patient's own words for the closest physician question of the transcript.

Deterministic and model-free (only the sentence embedder). The visible interview is cut into exchanges (a
run of doctor turns, then the patient turns that answer it). A question is embedded and compared by cosine
with every exchange's keys (``exchange_keys``: its doctor text, and with ``keys="clauses"`` also each
sentence of it and each sentence's tail after every comma, so "OK, OK, and are you on any medications?"
is also compared as "are you on any medications?"); an exchange scores its best key. When the best
exchange reaches ``threshold`` the answer is that exchange's patient turns, verbatim; otherwise the patient says ``NO_ANSWER`` — plainly that the transcript holds no
answer. ``NO_ANSWER`` is the one phrase the patients use for "not in my case" (the fact patient is told to
use it too), so a reader can tell it from a statement and nothing treats it as a fact.

The threshold trades a false "I don't know" (the answer was there in other words) against a wrong
exchange's words; ``medagent.history.evaluation.patient_validation.choose_threshold`` picks it on the
training split of the RES transcripts.

With ``opening=True`` the first question of an interview is the opening, whatever its words: it gets the
closest of the transcript's first ``OPENING_EXCHANGES`` exchanges at any score (the presenting complaint),
as a real patient answers "what brings you in?". Matched at the threshold, 9 of the first 24 eval
interviews answered the agents' opening "I don't know" (a reworded opening: "I was wondering if you could
tell me what brought you in"), and the opening-only baseline then had nothing to summarise; among the first
three, a greeting exchange ("How are you?") loses to the opening that follows it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from medagent.history.agent.redundancy import TextEmbedder, cosine_matrix
from medagent.history.simulation.simulator import SimulatedExchange
from medagent.interview.types import Turn
from medagent.llm.usage import UsageRecord

NO_ANSWER = "I don't know."
OPENING_EXCHANGES = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Exchange:
    """One exchange of a transcript: the doctor's text, the patient's answer and its turn indices."""

    index: int
    doctor: str
    patient: str
    patient_turns: tuple[int, ...]


def transcript_exchanges(turns: Sequence[Turn]) -> list[Exchange]:
    """The exchanges that end in a patient answer (a doctor run with no answer after it is left out)."""
    runs: list[list[Turn]] = []
    for t in turns:
        if not runs or (t.speaker == "doctor" and runs[-1][-1].speaker == "patient"):
            runs.append([t])
        else:
            runs[-1].append(t)
    out: list[Exchange] = []
    for run in runs:
        doctor = " ".join(t.text for t in run if t.speaker == "doctor")
        patient = [t for t in run if t.speaker == "patient"]
        if patient:
            out.append(
                Exchange(len(out), doctor, " ".join(t.text for t in patient), tuple(t.index for t in patient))
            )
    return out


def best_matches(embedder: TextEmbedder, questions: Sequence[str], keys: Sequence[str]) -> np.ndarray:
    """The cosine of every question with every key, ``(len(questions), len(keys))``."""
    if not questions or not keys:
        return np.zeros((len(questions), len(keys)), dtype=np.float32)
    q = np.asarray(embedder.encode(list(questions)), dtype=np.float32)
    k = np.asarray(embedder.encode(list(keys)), dtype=np.float32)
    return cosine_matrix(q, k)


def exchange_keys(doctor: str, keys: str = "exchange") -> list[str]:
    """What a question is compared with for one exchange's doctor text (module docstring): ``exchange``,
    the text whole; ``clauses``, also each sentence and each sentence's tail after every comma."""
    if keys == "exchange":
        return [doctor]
    if keys != "clauses":
        raise ValueError(f"keys must be 'exchange' or 'clauses', got {keys!r}")
    out = [doctor]
    for sentence in _SENTENCE_END.split(doctor):
        parts = sentence.split(",")
        out += [",".join(parts[i:]).strip() for i in range(len(parts))]
    return [k for k in dict.fromkeys(out) if k]


def exchange_matches(
    embedder: TextEmbedder, questions: Sequence[str], exchanges: Sequence[Exchange], keys: str = "exchange"
) -> np.ndarray:
    """Every question's score with every exchange, ``(len(questions), len(exchanges))``: the best cosine
    over the exchange's keys (``exchange_keys``)."""
    flat: list[str] = []
    owner: list[int] = []
    for j, x in enumerate(exchanges):
        for k in exchange_keys(x.doctor, keys):
            flat.append(k)
            owner.append(j)
    sims = best_matches(embedder, questions, flat)
    out = np.full((len(questions), len(exchanges)), -1.0, dtype=np.float32)
    for c, j in enumerate(owner):
        np.maximum(out[:, j], sims[:, c], out=out[:, j])
    return out


@dataclass
class ReplayPatient:
    """Answers with the patient's recorded words (module docstring); satisfies ``agent.Patient``.

    Args:
        turns: The visible turns of the source interview.
        embedder: Sentence embedder of the questions.
        threshold: Lowest cosine at which the closest exchange is replayed.
        exclude: Exchange indices not to replay (validation leaves the asked exchange out with it).
        keys: What a question is compared with (``exchange_keys``).
        opening: The first question gets the transcript's opening exchange (module docstring).
    """

    turns: Sequence[Turn]
    embedder: TextEmbedder
    threshold: float
    exclude: frozenset[int] = frozenset()
    keys: str = "exchange"
    opening: bool = False
    log: list[SimulatedExchange] = field(default_factory=list)
    calls: UsageRecord = field(default_factory=lambda: UsageRecord.calls(by_tag=True))

    def __post_init__(self) -> None:
        self.exchanges = [x for x in transcript_exchanges(self.turns) if x.index not in self.exclude]
        self.keys = str(getattr(self.keys, "value", self.keys))
        pairs = [(j, k) for j, x in enumerate(self.exchanges) for k in exchange_keys(x.doctor, self.keys)]
        self._owner = [j for j, _ in pairs]
        self._texts = [k for _, k in pairs]
        self._keys: np.ndarray | None = None

    def match(self, question: str) -> tuple[Exchange | None, float]:
        """The closest exchange and its score (None when the transcript has no exchange)."""
        if not self.exchanges:
            return None, 0.0
        if self._keys is None:
            self._keys = np.asarray(self.embedder.encode(self._texts), dtype=np.float32)
        q = np.asarray(self.embedder.encode([question]), dtype=np.float32)
        sims = cosine_matrix(q, self._keys)[0]
        c = int(np.argmax(sims))
        return self.exchanges[self._owner[c]], float(sims[c])

    async def answer(self, question: str) -> str:
        first = [x for x in self.exchanges if x.index < OPENING_EXCHANGES]
        if self.opening and not self.log and first:
            o = first[int(np.argmax(exchange_matches(self.embedder, [question], first, self.keys)[0]))]
            self.log.append(
                SimulatedExchange(question, o.patient, f"Doctor: {o.doctor}", source_turns=o.patient_turns)
            )
            return o.patient
        x, sim = self.match(question)
        if x is None or sim < self.threshold:
            self.log.append(SimulatedExchange(question, NO_ANSWER, f"no exchange (best cosine {sim:.3f})"))
            return NO_ANSWER
        self.log.append(
            SimulatedExchange(question, x.patient, f"Doctor: {x.doctor}", source_turns=x.patient_turns)
        )
        return x.patient
