"""Completion: clinical summary -> parent–child guideline retrieval -> final assessment grounded in passages.

Retrieved passages reach the model as delimited DATA blocks (``<<<PASSAGE id=...>>> ... <<<END PASSAGE>>>``),
which the prompt says to read as evidence, never as instructions; each hypothesis cites passages by their
id, and a cited id that was not given is dropped and recorded. An assessment reply that stays malformed
after the retries is ``valid=False`` with empty fields: it is scored as a failure, never guessed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from medagent.config import HistoryAgentConfig
from medagent.history.agent.preprocess import summary_parser
from medagent.history.llmio import (
    CallLog,
    MalformedReply,
    array,
    ask_json,
    json_format,
    obj_schema,
    require_list,
    require_str,
    string,
)
from medagent.llm.base import ChatModel
from medagent.prompts import load_prompt
from medagent.services import Doc, Retriever


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
    llm: ChatModel, cfg: HistoryAgentConfig, messages: list[dict[str, Any]], *, tag: str, log: CallLog
) -> tuple[str | None, list[str]]:
    """One clinical summary (``{"summary": ...}``) of what ``messages`` show; None when it stays malformed.

    The agent summarises its own state, the single-shot baseline the whole transcript: same call, so
    both arms are decoded under the same schema and budgets."""
    return await ask_json(
        llm,
        messages,
        summary_parser,
        prompt="clinical_summary",
        tag=tag,
        log=log,
        response_format=json_format("clinical_summary", obj_schema({"summary": string(1500)}))
        if cfg.json_schema
        else None,
        max_tokens=cfg.max_tokens_summary,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        max_retries=cfg.max_retries,
    )


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
        cfg.retrieval_top_k,
        sources=cfg.retrieval_sources,
        mode=cfg.retrieval_mode,
        return_parents=cfg.return_parents,
    )


def assessment_schema(passage_ids: list[str], max_hypotheses: int) -> dict[str, Any]:
    cite: dict[str, Any] = (
        array({"type": "string", "enum": passage_ids}, 4)
        if passage_ids
        else {"type": "array", "items": {"type": "string"}, "maxItems": 0}
    )
    dx = obj_schema({"diagnosis": string(100), "reason": string(300), "citations": cite})
    return json_format(
        "history_assessment",
        obj_schema(
            {
                "statement": string(1500),
                "differential": array(dx, max_hypotheses),
                "next_steps": array(string(200), 6),
                "red_flags": array(string(160), 6),
            }
        ),
    )


def parse_assessment(obj: dict[str, Any], passage_ids: set[str], errors: list[str]) -> Assessment:
    """Raises ``MalformedReply`` on a wrong shape; unknown citations are dropped into ``errors``."""
    statement = " ".join(require_str(obj, "statement").split())
    dxs: list[AssessedDiagnosis] = []
    for d in require_list(obj, "differential"):
        if not (isinstance(d, dict) and isinstance(d.get("diagnosis"), str)):
            raise MalformedReply("each differential entry needs a 'diagnosis' string")
        cites: list[str] = []
        for c in d.get("citations") or []:
            if str(c) in passage_ids:
                cites.append(str(c))
            else:
                errors.append(f"assessment: citation {str(c)[:60]!r} is not a given passage id; dropped")
        dxs.append(
            AssessedDiagnosis(d["diagnosis"].strip(), str(d.get("reason") or "").strip(), tuple(cites))
        )
    steps = [str(s).strip() for s in require_list(obj, "next_steps") if str(s).strip()]
    flags = [str(s).strip() for s in obj.get("red_flags") or [] if str(s).strip()]
    if not statement and not dxs:
        raise MalformedReply("neither a statement nor a differential")
    return Assessment(
        statement=statement, differential=tuple(dxs), next_steps=tuple(steps), red_flags=tuple(flags)
    )


async def assess(
    llm: ChatModel,
    cfg: HistoryAgentConfig,
    *,
    summary: str,
    findings: str,
    passages: list[Doc],
    log: CallLog,
) -> Assessment:
    """The final assessment from a summary, the gathered findings and the retrieved passages."""
    ids = [d.id for d in passages]
    messages = load_prompt("history_assessment").render(
        summary=summary,
        findings=findings,
        passages=[
            {"id": d.id, "title": d.title, "source": d.source, "content": d.content[: cfg.max_passage_chars]}
            for d in passages
        ],
    )
    cite_errors: list[str] = []
    result, errors = await ask_json(
        llm,
        messages,
        lambda obj: parse_assessment(obj, set(ids), cite_errors),
        prompt="history_assessment",
        tag="assessment",
        log=log,
        response_format=assessment_schema(ids, cfg.max_hypotheses) if cfg.json_schema else None,
        max_tokens=cfg.max_tokens_assessment,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        max_retries=cfg.max_retries,
    )
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
