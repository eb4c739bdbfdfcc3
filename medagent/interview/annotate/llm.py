"""The LLM annotator: JSON-schema-constrained extraction through any ``ChatModel``.

Per interview:

1. Doctor questions are found with the same rule as the lexicon annotator (``questions.question_text``),
   so both annotators label the same turns; the model assigns each one of the 11 categories.
2. The turns are cut into chunks of at most ``max_chunk_tokens`` estimated tokens (4 characters per token,
   plus 6 per turn for its label); a chunk never ends on a doctor turn when the next turn answers it, and a
   single over-long turn forms a chunk of its own.
3. Each chunk is one request whose ``response_format`` is a JSON schema: symptom names are an ``enum`` of
   the lexicon's canonical names, question categories an ``enum`` of ``INQUIRY_CATEGORIES`` keyed by turn
   number (every question of the chunk is a required key), lists are capped (``maxItems``) so a reply
   stays short. Backends without JSON-schema support get the same instructions in the prompt.
4. A reply that is not a JSON object of that shape is *malformed*: the error is recorded, shown to the
   model (a reply cut at ``max_tokens`` says so) and the request retried ``max_retries`` times; if it still fails, that chunk contributes nothing
   (empty fields) and its error stays in ``Annotation.errors``. An endpoint failure (``LLMError``) is
   recorded the same way. A symptom name outside the vocabulary is mapped through the lexicon or dropped
   (recorded); free-text diagnoses are mapped to canonical disease names when the lexicon knows them.
5. Chunks merge like the lexicon's evidence: positive wins over negative.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field, ValidationInfo, WithJsonSchema, create_model, field_validator

from medagent.config import AnnotatorConfig
from medagent.interview.annotate.matcher import Lexicon
from medagent.interview.annotate.questions import question_text
from medagent.interview.transcripts import Interview
from medagent.interview.types import INQUIRY_CATEGORIES, Annotation, QuestionAnnotation, Turn
from medagent.llm.base import ChatModel, LLMError
from medagent.llm.structured import MalformedReply, Output, ask, enum_str, parse, response_format
from medagent.prompts import load_prompt

__all__ = ["Extraction", "LLMAnnotator", "MalformedReply", "chunk_turns", "extraction_schema", "parse_reply"]

CHARS_PER_TOKEN = 4
TURN_OVERHEAD_TOKENS = 6
_KEYS = ("positive_findings", "negative_findings", "diagnoses", "question_categories")


def estimate_tokens(turn: Turn) -> int:
    return len(turn.text) // CHARS_PER_TOKEN + TURN_OVERHEAD_TOKENS


def chunk_turns(turns: Sequence[Turn], max_tokens: int) -> list[list[Turn]]:
    """Consecutive chunks of at most ``max_tokens`` estimated tokens (rules in the module docstring)."""
    chunks: list[list[Turn]] = []
    current: list[Turn] = []
    used = 0
    for turn in turns:
        cost = estimate_tokens(turn)
        if current and used + cost > max_tokens:
            carry: list[Turn] = []
            if current[-1].speaker == "doctor" and turn.speaker == "patient" and len(current) > 1:
                carry = [current.pop()]  # keep a question with its answer
            chunks.append(current)
            current, used = carry, sum(estimate_tokens(t) for t in carry)
        current.append(turn)
        used += cost
    if current:
        chunks.append(current)
    return chunks


def render_transcript(turns: Sequence[Turn]) -> str:
    return "\n".join(f"[{t.index}] {t.speaker.capitalize()}: {t.text}" for t in turns)


class Extraction(Output):
    """One chunk's reply. Names and categories outside the allowed sets pass validation: the annotator maps
    or drops them and records it (a constrained backend never sends one)."""

    positive_findings: list[str]
    negative_findings: list[str]
    diagnoses: list[str]
    question_categories: dict[str, Any]

    @field_validator("positive_findings", "negative_findings", "diagnoses", mode="before")
    @classmethod
    def _strings(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise ValueError(f"{info.field_name} must be a list of strings")
        return value

    @field_validator("question_categories", mode="before")
    @classmethod
    def _categories(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError("question_categories must be an object mapping turn numbers to categories")
        return value


def extraction_model(
    symptom_names: Sequence[str], question_turns: Sequence[int], max_findings: int, max_diagnoses: int
) -> type[Extraction]:
    """``Extraction`` with the schema of one chunk: names from the vocabulary, a category for every question
    turn, lists capped so a reply stays short (the caps shape decoding, they are not checked on reading)."""
    name: Any = enum_str(symptom_names)
    names: Any = Annotated[list[name], Field(json_schema_extra={"maxItems": max_findings})]  # type: ignore[valid-type]
    categories = {"type": "string", "enum": list(INQUIRY_CATEGORIES)}
    by_turn = {
        "type": "object",
        "properties": {str(t): categories for t in question_turns},
        "required": [str(t) for t in question_turns],
        "additionalProperties": False,
    }
    fields: dict[str, Any] = {
        "positive_findings": (names, ...),
        "negative_findings": (names, ...),
        "diagnoses": (
            Annotated[
                list[Annotated[str, Field(json_schema_extra={"maxLength": 80})]],
                Field(json_schema_extra={"maxItems": max_diagnoses}),
            ],
            ...,
        ),
        "question_categories": (Annotated[dict[str, Any], WithJsonSchema(by_turn)], ...),
    }
    return create_model("ChunkExtraction", __base__=Extraction, **fields)


def extraction_schema(
    symptom_names: Sequence[str], question_turns: Sequence[int], max_findings: int, max_diagnoses: int
) -> dict[str, Any]:
    """The ``response_format`` for one chunk."""
    model = extraction_model(symptom_names, question_turns, max_findings, max_diagnoses)
    return response_format("interview_annotation", model)


def parse_reply(text: str) -> dict[str, Any]:
    """The reply as a dict with the four keys of the right types.

    Raises:
        MalformedReply: Not a JSON object, a key missing, or a value of the wrong type.
    """
    return parse(Extraction, text).model_dump()


class LLMAnnotator:
    """Annotates interviews with a chat model (procedure in the module docstring).

    Args:
        llm: Any ``ChatModel`` (Serve handle, HTTP endpoint, scripted fake).
        cfg: Prompt names, chunk budget, retries, sampling.
        symptoms: Symptom lexicon: its canonical names are the allowed finding names.
        diseases: Disease lexicon, used to canonicalise free-text diagnoses.
        json_schema: Whether the backend honours ``response_format`` JSON schemas.
    """

    name = "llm"

    def __init__(
        self,
        llm: ChatModel,
        cfg: AnnotatorConfig,
        symptoms: Lexicon,
        diseases: Lexicon,
        *,
        json_schema: bool = True,
    ) -> None:
        self.llm = llm
        self.cfg = cfg
        self.symptoms = symptoms
        self.diseases = diseases
        self.json_schema = json_schema
        self.symptom_names = symptoms.canonical_names()
        self._known = set(self.symptom_names)
        self.prompt = load_prompt(cfg.prompt)

    async def _ask(
        self, chunk: Sequence[Turn], q_turns: list[int], errors: list[str], tag: str
    ) -> dict[str, Any] | None:
        base: list[dict[str, Any]] = self.prompt.render(
            transcript=render_transcript(chunk),
            symptom_names=self.symptom_names
            if self.cfg.list_symptoms_in_prompt or not self.json_schema
            else [],
            categories=list(INQUIRY_CATEGORIES),
            question_turns=q_turns,
        )
        output = extraction_model(self.symptom_names, q_turns, self.cfg.max_findings, self.cfg.max_diagnoses)
        try:
            reply = await ask(
                self.llm,
                base,
                output,
                prompt=self.cfg.prompt,
                schema_name="interview_annotation",
                json_schema_ok=self.json_schema,
                temperature=self.cfg.temperature,
                max_tokens=self.cfg.max_tokens,
                max_retries=self.cfg.max_retries,
                tag=tag,
                retry_prompt=self.cfg.retry_prompt,
                cut_hint=": raise it or lower max_chunk_tokens",
            )
        except LLMError as exc:
            errors.append(f"{tag}: LLMError: {exc}; chunk left empty")
            return None
        errors.extend(reply.errors)
        if reply.value is None:
            errors[-1] += "; chunk left empty"
            return None
        return reply.value.model_dump()

    def _names(self, values: list[str], errors: list[str], tag: str) -> list[str]:
        out: list[str] = []
        for v in values:
            name = " ".join(v.lower().split())
            mapped = [name] if name in self._known else self.symptoms.names_in(name)
            if not mapped:
                errors.append(f"{tag}: unknown symptom name {v!r} dropped")
            out.extend(m for m in mapped if m not in out)
        return out

    def _diagnoses(self, values: list[str]) -> list[str]:
        out: list[str] = []
        for v in values:
            text = " ".join(v.lower().split())
            for name in self.diseases.names_in(text) or ([text] if text else []):
                if name not in out:
                    out.append(name)
        return out

    async def annotate(self, interview: Interview) -> Annotation:
        """Annotates one interview; model mistakes and endpoint failures end up in ``errors``, never raised."""
        errors: list[str] = []
        evidence: dict[str, set[str]] = {}
        diagnoses: list[str] = []
        questions: list[QuestionAnnotation] = []
        chunks = chunk_turns(interview.turns, self.cfg.max_chunk_tokens)
        for k, chunk in enumerate(chunks):
            tag = f"chunk {k + 1}/{len(chunks)} (turns {chunk[0].index}-{chunk[-1].index})"
            q_turns = [t.index for t in chunk if t.speaker == "doctor" and question_text(t.text) is not None]
            reply = await self._ask(chunk, q_turns, errors, tag)
            if reply is None:
                continue
            for key, pol in (("positive_findings", "positive"), ("negative_findings", "negative")):
                for name in self._names(reply[key], errors, tag):
                    evidence.setdefault(name, set()).add(pol)
            diagnoses.extend(d for d in self._diagnoses(reply["diagnoses"]) if d not in diagnoses)
            cats = reply["question_categories"]
            by_index = {t.index: t for t in chunk}
            for turn in q_turns:
                category = cats.get(str(turn))
                if category not in INQUIRY_CATEGORIES:
                    errors.append(
                        f"{tag}: turn {turn}: category {category!r} is not an inquiry category; question left out"
                    )
                    continue
                questions.append(
                    QuestionAnnotation(turn=turn, text=by_index[turn].text, category=str(category))
                )
        return Annotation(
            interview_id=interview.id,
            source=interview.source,
            annotator=self.name,
            positive_findings=[n for n, p in evidence.items() if "positive" in p],
            negative_findings=[n for n, p in evidence.items() if "positive" not in p and "negative" in p],
            diagnoses=diagnoses,
            questions=questions,
            errors=errors,
        )
