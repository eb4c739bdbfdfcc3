"""How faithful the simulated patient is, measured finding by finding with the lexicon annotator.

The LLM judge (``simulator.FidelityJudge``) reads the same excerpts the simulator was shown, and it is
the same small model. This measure needs no model and does not depend on how the simulator's context
was chosen. The lexicon annotator (``medagent.interview.annotate.lexicon``) reads two things with the
same conventions:

- **the source**: the interview's visible turns (what the simulator was grounded in; the physician's
  closing statement is excluded), giving each symptom the real patient mentions a polarity (positive wins);
- **the simulation**: the logged exchanges (the agent's question, the simulator's answer) as an interview.

From these it counts:

- **Polarity** of each finding the simulator states: the source's polarity (``agree``), the opposite one
  (``contradict``), or a symptom the source never mentions (``beyond``). Agreement is
  ``agree / (agree + contradict)``.
- **Disclosure**: each time a question names a symptom that the source annotates, did the answer state
  that symptom (``disclosed``), and with the source's polarity (``disclosed_agree``)? The disclosure rate is
  ``disclosed / asked``. A question the lexicon cannot tie to a symptom (a wh-question about the story,
  a medication question) is not counted.

Counts are summed over the interviews of a run (micro averages), so long interviews weigh more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from medagent.history.evaluation.row import InterviewRow
from medagent.interview.transcripts import Interview
from medagent.interview.types import Turn

if TYPE_CHECKING:
    from medagent.history.evaluation.record import InterviewRecord
    from medagent.interview.annotate.lexicon import LexiconAnnotator


@dataclass
class LexicalFidelity:
    """The counts of one interview (module docstring)."""

    stated: int = 0
    agree: int = 0
    contradict: int = 0
    beyond: int = 0
    asked: int = 0
    disclosed: int = 0
    disclosed_agree: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class FidelityScorer:
    """Scores a simulator's exchanges against its source interview (module docstring)."""

    def __init__(self, annotator: LexiconAnnotator) -> None:
        self.annotator = annotator

    @classmethod
    def from_data_root(cls, data_root: str | None = None) -> FidelityScorer:
        from medagent.interview.annotate.lexicon import LexiconAnnotator
        from medagent.interview.meditod import load_ontology

        return cls(LexiconAnnotator.from_ontology(load_ontology(data_root)))

    def findings(self, interview: Interview) -> dict[str, str]:
        """Symptom -> ``positive`` / ``negative``, as the annotator reads the whole interview."""
        a = self.annotator.annotate(interview)
        return {n: "negative" for n in a.negative_findings} | {n: "positive" for n in a.positive_findings}

    def score(self, source: Interview, exchanges: Sequence[tuple[str, str]]) -> LexicalFidelity:
        """Counts for ``exchanges`` (question, answer) simulated from ``source`` (its visible turns)."""
        truth = self.findings(source)
        out = LexicalFidelity()
        for question, answer in exchanges:
            asked = self.annotator.asked_symptoms(question)
            said: dict[str, set[str]] = {}
            for name, pol in self.annotator.answer_findings(answer, question):
                said.setdefault(name, set()).add(pol)
            for name in asked:
                if name not in truth:
                    continue
                out.asked += 1
                if name in said:
                    out.disclosed += 1
                    out.disclosed_agree += truth[name] in said[name]
        for name, pol in self.findings(_as_interview(source, exchanges)).items():
            out.stated += 1
            if name not in truth:
                out.beyond += 1
            elif truth[name] == pol:
                out.agree += 1
            else:
                out.contradict += 1
        return out


def _as_interview(source: Interview, exchanges: Sequence[tuple[str, str]]) -> Interview:
    turns: list[Turn] = []
    for question, answer in exchanges:
        turns.append(Turn(len(turns), "doctor", question))
        turns.append(Turn(len(turns), "patient", answer))
    return Interview(id=f"{source.id}/simulated", source=source.source, turns=tuple(turns))


def add_lexical_fidelity(
    records: Sequence[InterviewRecord],
    rows: Mapping[str, dict[str, Any]],
    sources: Mapping[str, Interview],
    scorer: FidelityScorer,
) -> None:
    """Fills ``fidelity_lexical`` of each scored record from its row's logged simulator exchanges.

    Args:
        sources: Interview id -> the interview cut to its visible turns (what the simulator saw).
    """
    for r in records:
        row = rows.get(r.interview_id)
        source = sources.get(r.interview_id)
        log = (InterviewRow.from_dict(row).simulator or []) if row is not None else []
        if r.error is None and source is not None and log:
            pairs = [(str(x["question"]), str(x["answer"])) for x in log]
            r.fidelity_lexical = scorer.score(source, pairs).to_dict()


def summarise(counts: Iterable[Mapping[str, int] | None]) -> dict[str, Any]:
    """Micro-averaged rates over the interviews that have counts, with the summed counts."""
    total = {f.name: 0 for f in fields(LexicalFidelity)}
    n = 0
    for c in counts:
        if c:
            n += 1
            for k in total:
                total[k] += int(c.get(k, 0))

    def ratio(a: int, b: int) -> float | None:
        return a / b if b else None

    return {
        "sim_polarity_agreement": ratio(total["agree"], total["agree"] + total["contradict"]),
        "sim_beyond_source": ratio(total["beyond"], total["stated"]),
        "sim_disclosure_rate": ratio(total["disclosed"], total["asked"]),
        "sim_disclosure_agreement": ratio(total["disclosed_agree"], total["disclosed"]),
        "sim_fidelity_counts": total,
        "sim_fidelity_n": n,
    }
