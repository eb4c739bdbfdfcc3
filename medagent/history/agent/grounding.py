"""Grounded state: a slot value or red flag enters the state only with a patient quote that expresses it.

The per-turn update cites, for every slot value and red flag it proposes, the patient's own words. One
check (``Grounding.check``) decides every slot and every red flag, in the same three steps:

1. **The patient said it**: the quote's word tokens occur contiguously in one of the patient's turns.
2. **The patient was sure**: no uncertainty scope ("not sure", "I don't know", "maybe", the NegEx-style
   triggers of ``annotate.matcher``) covers the quote there; an unsure answer fills nothing. A red flag
   must also not be negated ("no blood when I cough"); a slot may be (a denial, "no allergies", is a fact).
3. **The quote expresses the concept**: the concept's extension, where the data gives one, else its meaning:

   * a concept with findings in the data-built symptom lexicon (the MediTOD-derived lexicon of the
     information table plus the annotator's lay synonyms) is anchored on them: every red flag (its
     findings are the lexicon's reading of the flag's own meaning, e.g. "coughing up blood" ->
     *hemoptysis*) and the ``symptom`` slot (any symptom finding). The quote must mention one of them;
   * every other slot (onset, duration, allergies, occupation, ...) has no finding lexicon, so its quote
     must be near the slot's meaning in embedding space: cosine >= ``similarity_threshold`` with
     ``"<slot>: <description>"`` *and* that slot among the ``top_k`` slots nearest to the quote.

   Why not embeddings for red flags too: with all-MiniLM-L6-v2, "a cough for three days" scores 0.63
   against "coughing up blood" while true flag quotes score 0.31 ("I feel confused" / confusion) to 0.88,
   so no threshold separates them; the lexicon's *hemoptysis* needs blood, not a cough. Why not a lexicon
   for the attribute and history slots: the data has no lexicon of durations, onsets or occupations, and
   a hand-written keyword list would stand in for the method.

A refused value or flag is kept as a ``Refusal`` (slot or flag, value, quote, reason) in the update, so a
trace shows what was refused and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

from medagent.history.agent.redundancy import TextEmbedder, cosine_matrix
from medagent.history.agent.state import SLOTS
from medagent.interview.annotate.matcher import Lexicon, Mention, polarity, tokenize, trigger_scopes

# The slot whose concept is "any current symptom": anchored on the whole symptom lexicon.
SYMPTOM_SLOT = "symptom"


@lru_cache(maxsize=1)
def symptom_lexicon() -> Lexicon:
    """The information table's symptom lexicon (built from MediTOD) plus the annotator's lay synonyms."""
    from medagent.history.agent.information import load_table
    from medagent.interview.annotate.synonyms import MULTI_SYMPTOM_TERMS, SYMPTOM_BLOCKS, SYMPTOM_SYNONYMS
    from medagent.interview.annotate.vocab import _blocks, _split

    table = load_table(None)
    terms: list[tuple[str, Sequence[str]]] = [(s, tuple(c)) for s, c in table.symptom_terms]
    terms += _split(SYMPTOM_SYNONYMS)
    terms += list(MULTI_SYMPTOM_TERMS.items())
    terms += _blocks(SYMPTOM_BLOCKS)
    return Lexicon(terms)


def _words(text: str) -> list[str]:
    return [t for t in tokenize(text) if t[0].isalnum()]


def locate(quote: str, patient_lines: Sequence[str]) -> tuple[str, Mention] | None:
    """The first patient line holding ``quote`` verbatim (word tokens, case-insensitive) and the span."""
    want = _words(quote)
    if not want:
        return None
    for line in patient_lines:
        toks = tokenize(line)
        words = [i for i, t in enumerate(toks) if t[0].isalnum()]
        for k in range(len(words) - len(want) + 1):
            if [toks[i] for i in words[k : k + len(want)]] == want:
                return line, Mention(words[k], words[k + len(want) - 1] + 1, (), quote)
    return None


class Grounding:
    """The one grounding check of slots and red flags (module docstring).

    Args:
        embedder: Encodes quotes and slot meanings (the agent's sentence encoder).
        red_flags: Red-flag id -> meaning (``HistoryAgentConfig.red_flags``).
        similarity_threshold / top_k: The embedding step for slots without a finding lexicon.
    """

    def __init__(
        self, embedder: TextEmbedder, red_flags: Mapping[str, str], similarity_threshold: float, top_k: int
    ) -> None:
        self.embedder = embedder
        self.threshold = similarity_threshold
        self.top_k = top_k
        self.lexicon = symptom_lexicon()
        self.flag_findings = {f: set(self.lexicon.names_in(meaning)) for f, meaning in red_flags.items()}
        unanchored = [f for f, names in self.flag_findings.items() if not names]
        if unanchored:
            raise ValueError(
                f"red flags {unanchored} name no finding of the symptom lexicon in their meaning; "
                "reword the meaning so the grounding check can tell when a quote expresses the flag"
            )
        self.slot_names = [s.name for s in SLOTS]
        self.slot_vectors = np.asarray(
            embedder.encode([f"{s.name.replace('_', ' ')}: {s.description}" for s in SLOTS])
        )

    def _said(self, quote: str, patient_lines: Sequence[str]) -> tuple[list[str], Mention] | str:
        """Steps 1 and 2: the patient line's tokens and the quote's span there, or why the quote fails."""
        if not _words(quote):
            return "no quote"
        hit = locate(quote, patient_lines)
        if hit is None:
            return "the quote is not in the patient's words"
        line, span = hit
        toks = tokenize(line)
        inside = any(kind == "uncertain" for *_, kind in trigger_scopes(_words(quote)))
        if inside or polarity(span, trigger_scopes(toks)) == "uncertain":
            return "the patient was unsure"
        return toks, span

    def check_slot(self, slot: str, quote: str, patient_lines: Sequence[str]) -> str | None:
        """None when ``quote`` grounds a value of ``slot`` (a denial may), else the reason it does not."""
        said = self._said(quote, patient_lines)
        if isinstance(said, str):
            return said
        if slot == SYMPTOM_SLOT:
            return None if self.lexicon.names_in(quote) else "the quote names no symptom"
        sims = cosine_matrix(np.asarray(self.embedder.encode([quote])), self.slot_vectors)[0]
        j = self.slot_names.index(slot)
        rank = int((sims > sims[j]).sum())
        if sims[j] < self.threshold or rank >= self.top_k:
            return f"the quote does not express {slot} (cosine {sims[j]:.2f}, rank {rank + 1})"
        return None

    def check_flag(self, flag: str, quote: str, patient_lines: Sequence[str]) -> str | None:
        """None when ``quote`` grounds red flag ``flag``: one of the flag's findings is mentioned in the quote
        and affirmed in the patient's line; else the reason it does not."""
        said = self._said(quote, patient_lines)
        if isinstance(said, str):
            return said
        toks, span = said
        want = self.flag_findings[flag]
        found = [
            m
            for m in self.lexicon.find(toks)
            if span.start <= m.start and m.end <= span.end and want & set(m.canonicals)
        ]
        if not found:
            return f"the quote does not express {flag} ({', '.join(sorted(want))})"
        scopes = trigger_scopes(toks)
        if not any(polarity(m, scopes) == "positive" for m in found):
            return "the patient denied it"
        return None
