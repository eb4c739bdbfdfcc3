"""Annotators that turn interview text into MediTOD-style ``Annotation``s, and their evaluation.

- ``LexiconAnnotator`` (``lexicon``): ontology synonyms, NegEx-style negation, question-category rules.
- ``LLMAnnotator`` (``llm``): JSON-schema-constrained extraction with any ``ChatModel``.
- ``score_annotations`` (``evaluate``): per-category precision / recall / F1 against gold annotations.
"""

from medagent.interview.annotate.evaluate import EvalReport, score_annotations, write_report
from medagent.interview.annotate.lexicon import LexiconAnnotator
from medagent.interview.annotate.llm import LLMAnnotator
from medagent.interview.annotate.vocab import build_disease_lexicon, build_symptom_lexicon

__all__ = [
    "EvalReport",
    "LLMAnnotator",
    "LexiconAnnotator",
    "build_disease_lexicon",
    "build_symptom_lexicon",
    "score_annotations",
    "write_report",
]
