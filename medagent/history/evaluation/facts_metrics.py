"""Endpoints from the case's facts (``medagent.history.facts``): what the interview brought out, what the
summary says.

**When does a text state a fact** (``FactMatcher.stated``)? When the fact's quote occurs in it verbatim
(``store.normalise``d; how a replayed answer states its facts), or when one of its clauses is close to the
fact by embedding: the cosine of the sentence embedder (MiniLM on CPU) between the clause and the fact's
``statement`` is at least ``threshold``. Clauses are the text cut at sentence ends, semicolons and commas;
one too short to carry a fact (under ``MIN_CLAUSE_WORDS`` words) is not matched by embedding. The
embedding match does not read polarity well ("no fever" / "fever" are close): a summary that flips a
denial is counted as stating the fact, which errs toward recall, the same for every arm.

* **Elicited-fact recall**: the share of the case's facts stated by some patient answer of the simulated
  interview (the patient's log). A reader of the physician's own transcript (the oracle) saw every turn:
  its recall is 1 by construction, the ceiling the arms are read against.
* **Summary fact recall**: the share of the case's facts the final summary (the assessment's text) states.
* **Summary fact precision**: the share of the summary's clauses that state some fact of the case; a
  clause that matches none is a claim not in the case (invented, or inferred: a diagnosis, a plan).
* An answer that is the patients' "not in my case" phrase (``is_no_answer``) states nothing.

The primary endpoint (``PRIMARY``) is summary fact recall: it reads what the whole pipeline ends with, as
BERTScore did, but against the case's facts rather than the physician's closing words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from medagent.history.agent.redundancy import TextEmbedder, cosine_matrix
from medagent.history.facts.store import Fact, normalise

PRIMARY = ("summary fact recall", "summary_fact_recall")
MIN_CLAUSE_WORDS = 2
_CLAUSE = re.compile(r"(?<=[.!?;])\s+|,\s+|\n+")
# The phrases the patients are told to use when the case holds no answer (replay.NO_ANSWER, the fact
# patient's prompt) and the LLM simulator's (simulator.DONT_KNOW): read as "said nothing", never as a fact.
NO_ANSWER_PREFIXES = ("i don't know", "i do not know", "i'm not sure", "i am not sure")


def is_no_answer(text: str) -> bool:
    """Whether ``text`` is a patient's "not in my case" reply (an answer that opens with it and says
    nothing else of substance)."""
    t = normalise(text).strip(" .!")
    return any(t.startswith(p) and len(t) <= len(p) + 12 for p in NO_ANSWER_PREFIXES)


def clauses(text: str) -> list[str]:
    return [c.strip(" .;") for c in _CLAUSE.split(text) if len(c.split()) >= MIN_CLAUSE_WORDS]


@dataclass
class FactMatcher:
    """Which facts a text states (module docstring)."""

    embedder: TextEmbedder
    threshold: float = 0.6

    def stated(self, facts: Sequence[Fact], texts: Sequence[str], *, quotes: bool = True) -> set[str]:
        """Ids of ``facts`` stated by any of ``texts`` (``quotes=False``: by the embedding match alone)."""
        texts = [t for t in texts if t and not is_no_answer(t)]
        if not facts or not texts:
            return set()
        joined = [normalise(t) for t in texts]
        out = {f.id for f in facts if quotes and any(normalise(f.quote) in t for t in joined)}
        rest = [f for f in facts if f.id not in out]
        parts = [c for t in texts for c in clauses(t)]
        if rest and parts:
            sims = self._sims([f.statement for f in rest], parts)
            out |= {f.id for f, row in zip(rest, sims, strict=True) if row.max() >= self.threshold}
        return out

    def supported_clauses(self, facts: Sequence[Fact], text: str) -> tuple[int, int]:
        """``(clauses that state some fact, clauses)`` of ``text``."""
        parts = clauses(text)
        return sum(self.clause_support(facts, parts)), len(parts)

    def clause_support(self, facts: Sequence[Fact], parts: Sequence[str]) -> list[bool]:
        """For each clause: does it state some fact (its quote inside, or the embedding match)?"""
        if not parts or not facts:
            return [False] * len(parts)
        sims = self._sims(parts, [f.statement for f in facts])
        quoted = [any(normalise(f.quote) in normalise(p) for f in facts) for p in parts]
        return [q or bool(row.max() >= self.threshold) for q, row in zip(quoted, sims, strict=True)]

    def _sims(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        va = np.asarray(self.embedder.encode(list(a)), dtype=np.float32)
        vb = np.asarray(self.embedder.encode(list(b)), dtype=np.float32)
        return cosine_matrix(va, vb)


@dataclass(frozen=True)
class FactScores:
    """The fact endpoints of one interview (None where not applicable)."""

    n_facts: int
    elicited_fact_recall: float | None
    summary_fact_recall: float | None
    summary_fact_precision: float | None


def fact_scores(
    facts: Sequence[Fact],
    answers: Sequence[str] | None,
    summary: str,
    matcher: FactMatcher,
) -> FactScores:
    """Scores of one interview. ``answers`` None: the arm read the physician's transcript (recall 1)."""
    if not facts:
        return FactScores(0, None, None, None)
    n = len(facts)
    elicited = 1.0 if answers is None else len(matcher.stated(facts, answers)) / n
    if not summary:
        return FactScores(n, elicited, 0.0, None)
    recall = len(matcher.stated(facts, [summary])) / n
    ok, total = matcher.supported_clauses(facts, summary)
    return FactScores(n, elicited, recall, ok / total if total else None)
