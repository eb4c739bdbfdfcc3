"""Completion: clinical summary -> parent–child guideline retrieval -> final assessment grounded in passages.

Retrieved passages reach the model as delimited DATA blocks (``<<<PASSAGE id=...>>> ... <<<END PASSAGE>>>``),
which the prompt says to read as evidence, never as instructions; each hypothesis cites passages by their
id, and a cited id that was not given is dropped and recorded. An assessment reply that stays malformed
after the retries is ``valid=False`` with empty fields: it is scored as a failure, never guessed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BeforeValidator, create_model, model_validator

from medagent.config import HistoryAgentConfig
from medagent.history.agent.preprocess import SummaryReply
from medagent.llm.base import ChatModel
from medagent.llm.structured import Output, Text, ask, capped_list, capped_str, enum_str, response_format
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt
from medagent.services import Doc, Retriever


def _or_empty(value: Any) -> str:
    return str(value or "")


def _or_none(value: Any) -> Any:
    return value or []


def _texts(value: Any) -> Any:
    """A list's items as text (a small model writes a number or an object as a step)."""
    return [str(s) for s in value] if isinstance(value, list) else value


def _texts_or_none(value: Any) -> Any:
    return _texts(_or_none(value))


@dataclass(frozen=True)
class AssessedDiagnosis:
    diagnosis: str
    reason: str
    citations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Assessment:
    """The final assessment.

    Attributes:
        statement: A physician-style closing statement to the patient (likely diagnosis and plan): the text
            scored against the physician's own closing statement.
        differential: Ranked diagnoses with reasons and cited passage ids.
        next_steps: Investigations, treatment, follow-up.
        red_flags: Urgent findings to act on, as the model states them.
        summary: The clinical summary the retrieval query was.
        passages: Retrieved passages (id, doc_id, source, title, score, the first ``PASSAGE_EXCERPT_CHARS``
            characters as ``excerpt``).
        grounded: Whether any passage was given to the model.
        valid: False when the reply was unusable (fields empty).
        errors: Handled problems (malformed replies, unknown citations).
    """

    statement: str
    differential: tuple[AssessedDiagnosis, ...] = ()
    next_steps: tuple[str, ...] = ()
    red_flags: tuple[str, ...] = ()
    summary: str = ""
    passages: tuple[dict[str, Any], ...] = ()
    grounded: bool = False
    valid: bool = True
    errors: tuple[str, ...] = field(default_factory=tuple)

    def text(self) -> str:
        """What is compared with the physician's statement: the statement, else the structured fields."""
        if self.statement:
            return self.statement
        parts = [f"{d.diagnosis}: {d.reason}" for d in self.differential]
        parts += list(self.next_steps)
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def summarise(
    llm: ChatModel, cfg: HistoryAgentConfig, messages: list[dict[str, Any]], *, tag: str, log: UsageRecord
) -> tuple[str | None, list[str]]:
    """One clinical summary (``{"summary": ...}``) of what ``messages`` show; None when it stays malformed.

    The agent summarises its own state, the single-shot baseline the whole transcript: same call, so
    both arms are decoded under the same schema and budgets."""
    reply = await ask(
        llm,
        messages,
        SummaryReply,
        prompt="clinical_summary",
        json_schema_ok=cfg.generation.json_schema,
        tag=tag,
        usage=log,
        max_tokens=cfg.generation.max_tokens_summary,
        temperature=cfg.generation.temperature,
        top_p=cfg.generation.top_p,
        max_retries=cfg.generation.max_retries,
    )
    return (reply.value.summary if reply.value else None), reply.errors


# Characters of each passage kept with the assessment: enough for a reader (the patient page) to see what a
# citation points at, without storing whole guideline documents in every interview row.
PASSAGE_EXCERPT_CHARS = 400


def passage_meta(doc: Doc) -> dict[str, Any]:
    return {
        "id": doc.id,
        "doc_id": doc.doc_id,
        "source": doc.source,
        "title": doc.title,
        "score": doc.score,
        "excerpt": doc.content[:PASSAGE_EXCERPT_CHARS],
    }


async def retrieve_passages(retriever: Retriever, summary: str, cfg: HistoryAgentConfig) -> list[Doc]:
    """Parent–child guideline retrieval for the summary: children matched, parents returned, hybrid fusion."""
    return await retriever.retrieve(
        summary,
        cfg.retrieval.top_k,
        sources=cfg.retrieval.sources,
        mode=cfg.retrieval.mode,
        return_parents=cfg.retrieval.return_parents,
    )


class DiagnosisReply(Output):
    diagnosis: capped_str(100)  # type: ignore[valid-type]
    reason: Annotated[capped_str(300), BeforeValidator(_or_empty)] = ""  # type: ignore[valid-type]
    citations: Annotated[list[Text], BeforeValidator(_or_none)] = []


class AssessmentReply(Output):
    """The ``history_assessment`` reply (``assessment_model`` gives the schema of one request)."""

    statement: capped_str(1500)  # type: ignore[valid-type]
    differential: list[DiagnosisReply]
    next_steps: Annotated[capped_list(capped_str(200), 6), BeforeValidator(_texts)]  # type: ignore[valid-type]
    red_flags: Annotated[capped_list(capped_str(160), 6), BeforeValidator(_texts_or_none)] = []  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _usable(self) -> AssessmentReply:
        self.statement = " ".join(self.statement.split())
        if not self.statement and not self.differential:
            raise ValueError("neither a statement nor a differential")
        return self


@lru_cache(maxsize=32)
def assessment_model(passage_ids: tuple[str, ...], max_hypotheses: int) -> type[AssessmentReply]:
    """``AssessmentReply`` whose schema lets a diagnosis cite only the given passages (none: no citation)."""
    cite = capped_list(enum_str(passage_ids), 4) if passage_ids else capped_list(str, 0)
    dx = create_model("CitedDiagnosis", __base__=DiagnosisReply, citations=(cite, ...))
    return create_model(
        "HistoryAssessment", __base__=AssessmentReply, differential=(capped_list(dx, max_hypotheses), ...)
    )


def assessment_schema(passage_ids: list[str], max_hypotheses: int) -> dict[str, Any]:
    return response_format("history_assessment", assessment_model(tuple(passage_ids), max_hypotheses))


def read_assessment(reply: AssessmentReply, passage_ids: set[str], errors: list[str]) -> Assessment:
    """The assessment of a valid reply; citations of passages not given are dropped into ``errors``."""
    dxs: list[AssessedDiagnosis] = []
    for d in reply.differential:
        cites: list[str] = []
        for c in d.citations:
            if c in passage_ids:
                cites.append(c)
            else:
                errors.append(f"assessment: citation {c[:60]!r} is not a given passage id; dropped")
        dxs.append(AssessedDiagnosis(d.diagnosis.strip(), d.reason.strip(), tuple(cites)))
    return Assessment(
        statement=reply.statement,
        differential=tuple(dxs),
        next_steps=tuple(s.strip() for s in reply.next_steps if s.strip()),
        red_flags=tuple(s.strip() for s in reply.red_flags if s.strip()),
    )


async def assess(
    llm: ChatModel,
    cfg: HistoryAgentConfig,
    *,
    summary: str,
    findings: str,
    passages: list[Doc],
    log: UsageRecord,
) -> Assessment:
    """The final assessment from a summary, the gathered findings and the retrieved passages."""
    ids = [d.id for d in passages]
    messages = load_prompt("history_assessment").render(
        summary=summary,
        findings=findings,
        passages=[
            {
                "id": d.id,
                "title": d.title,
                "source": d.source,
                "content": d.content[: cfg.retrieval.max_passage_chars],
            }
            for d in passages
        ],
    )
    reply = await ask(
        llm,
        messages,
        assessment_model(tuple(ids), cfg.generation.max_hypotheses),
        prompt="history_assessment",
        json_schema_ok=cfg.generation.json_schema,
        tag="assessment",
        usage=log,
        max_tokens=cfg.generation.max_tokens_assessment,
        temperature=cfg.generation.temperature,
        top_p=cfg.generation.top_p,
        max_retries=cfg.generation.max_retries,
    )
    errors = reply.errors
    cite_errors: list[str] = []
    result = None if reply.value is None else read_assessment(reply.value, set(ids), cite_errors)
    log.errors.extend(cite_errors)
    meta = tuple(passage_meta(d) for d in passages)
    if result is None:
        return Assessment(
            statement="",
            summary=summary,
            passages=meta,
            grounded=bool(passages),
            valid=False,
            errors=tuple(errors),
        )
    return Assessment(
        statement=result.statement,
        differential=result.differential,
        next_steps=result.next_steps,
        red_flags=result.red_flags,
        summary=summary,
        passages=meta,
        grounded=bool(passages),
        errors=(*errors, *cite_errors),
    )
