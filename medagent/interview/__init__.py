"""Interviews: transcripts, MediTOD-style annotations, annotators (and, later, the history-taking agent)."""

from medagent.interview.transcripts import Interview
from medagent.interview.types import INQUIRY_CATEGORIES, Annotation, QuestionAnnotation, Turn

__all__ = ["INQUIRY_CATEGORIES", "Annotation", "Interview", "QuestionAnnotation", "Turn"]
