"""Repeated questions, measured independently of the redundancy control that blocks them.

The control (``redundancy.RedundancyChecker``) refuses a question that is verbatim, targets a filled slot,
or has MiniLM cosine >= 0.75 with an asked one. Measuring repeats with the same embedder and threshold
gives 0 by construction for amq, so this check shares none of its parts: no embedding, no slot tags (the
policy's slot labels are the agent's own claim), only what a reader of the transcript sees.

A question is a **topic** ``(category, concepts, words)``:

* ``category``: the inquiry category the lexicon annotator gives the physicians' questions
  (``annotate.questions.categorize``, MediTOD's 11, rules on the text);
* ``concepts``: the MediTOD ontology's symptoms and diseases it names (the annotator's lexicons, synonyms
  folded to one canonical name);
* ``words``: its content words, lower-cased, stop words and concept words removed, a crude suffix strip
  (``-s``, ``-es``, ``-ing``, ``-ed``) so "starting" and "started" meet.

Question ``i`` **repeats** an earlier question ``j`` when both have the same category and the same concept
set and their word sets overlap with Jaccard >= ``min_jaccard`` (default 0.5). "When did your cough
start?" repeats "When did the cough start?" ({when, start} both); "Is the cough worse at night?" does not;
"Any fevers?" repeats "Have you had a fever?" (the concept alone, no other word). The rate is repeats /
questions asked. A lexical check misses paraphrases with other
words, and it cannot tell a deliberate clarification from a repeat; it is a second opinion, not a gold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from medagent.interview.annotate.matcher import Lexicon, tokenize
from medagent.interview.annotate.questions import categorize

STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "anything",
        "are",
        "as",
        "at",
        "be",
        "been",
        "being",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "done",
        "for",
        "from",
        "get",
        "got",
        "had",
        "has",
        "have",
        "having",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "like",
        "many",
        "me",
        "more",
        "much",
        "my",
        "no",
        "not",
        "now",
        "of",
        "on",
        "or",
        "other",
        "over",
        "so",
        "some",
        "something",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "too",
        "up",
        "us",
        "very",
        "was",
        "we",
        "were",
        "what",
        "whether",
        "which",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "ok",
        "okay",
        "right",
        "well",
        "um",
        "uh",
        "alright",
        "just",
        "tell",
        "please",
        "kind",
        "sort",
    ]
)
_SUFFIX = re.compile(r"(?:ing|ed|es|s)$")


def _stem(word: str) -> str:
    return _SUFFIX.sub("", word) if len(word) > 4 else word


@dataclass(frozen=True)
class Topic:
    """What a question asks about, as a reader of the transcript sees it (module docstring)."""

    category: str
    concepts: frozenset[str]
    words: frozenset[str]


class TopicRepeats:
    """Topics of questions and the share that repeat an earlier one.

    Args:
        symptoms: The annotator's symptom lexicon (``vocab.build_symptom_lexicon``).
        diseases: The annotator's disease lexicon (``vocab.build_disease_lexicon``).
        min_jaccard: Word overlap at or above which two same-category, same-concept questions repeat.
    """

    def __init__(self, symptoms: Lexicon, diseases: Lexicon, min_jaccard: float = 0.5) -> None:
        self.symptoms = symptoms
        self.diseases = diseases
        self.min_jaccard = min_jaccard

    @classmethod
    def from_data_root(cls, data_root: str | None = None, min_jaccard: float = 0.5) -> TopicRepeats:
        from medagent.interview.annotate.vocab import build_disease_lexicon, build_symptom_lexicon
        from medagent.interview.meditod import load_ontology

        ontology = load_ontology(data_root)
        return cls(build_symptom_lexicon(ontology), build_disease_lexicon(ontology), min_jaccard)

    def topics(self, questions: Sequence[str]) -> list[Topic]:
        out: list[Topic] = []
        previous: str | None = None
        for q in questions:
            previous = categorize(q, self.symptoms, self.diseases, previous)
            tokens = tokenize(q)
            mentions = [*self.symptoms.find(tokens), *self.diseases.find(tokens)]
            concepts = frozenset(c for m in mentions for c in m.canonicals)
            # The words that named a concept are the concept (synonyms folded), not extra words.
            named = {i for m in mentions for i in range(m.start, m.end)}
            words = frozenset(
                _stem(t)
                for i, t in enumerate(tokens)
                if t[0].isalnum() and t not in STOP_WORDS and i not in named
            )
            out.append(Topic(previous, concepts, words))
        return out

    def repeats(self, questions: Sequence[str]) -> list[int | None]:
        """For each question, the index of the earlier question it repeats (None: a new topic)."""
        topics = self.topics(questions)
        out: list[int | None] = []
        for i, t in enumerate(topics):
            out.append(next((j for j in range(i) if self._same(topics[j], t)), None))
        return out

    def rate(self, questions: Sequence[str]) -> float:
        """Share of ``questions`` that repeat an earlier one (0 for none)."""
        if not questions:
            return 0.0
        return sum(r is not None for r in self.repeats(questions)) / len(questions)

    def _same(self, a: Topic, b: Topic) -> bool:
        if a.category != b.category or a.concepts != b.concepts:
            return False
        union = a.words | b.words
        if not union:  # nothing but stop and concept words on both sides: the same concept, asked again
            return True
        return len(a.words & b.words) / len(union) >= self.min_jaccard
