"""Turning a model's final reply into an option letter, or ``INVALID``.

The rule (after lm-eval-harness): a letter is returned only when the reply commits to exactly one
option by a recognised pattern. Anything ambiguous or absent is ``INVALID`` and is reported next to
accuracy; it is never a guessed letter.
"""

from __future__ import annotations

import re

from pydantic import create_model

from medagent.llm.structured import Output, enum_str, response_format
from medagent.llm.structured import first_object as parse_json_object
from medagent.types import INVALID

# Strongest first. Each pattern captures one letter; a tier wins only if all its matches agree.
_JSON_FIELD = re.compile(r'"(?:answer|final_answer|choice)"\s*:\s*"\(?([A-Z])\)?(?:[.):\s][^"]*)?"')
_TIERS: tuple[re.Pattern[str], ...] = (
    # Words are case-insensitive, the letter is not: "the answer is a bit..." must not read as "A".
    re.compile(r"\b(?i:(?:final\s+)?answer\s*(?:is|:)?\s*(?:option\s*)?)[\(\[]?([A-Z])[\)\]]?(?![A-Za-z])"),
    re.compile(
        r"\b(?i:(?:correct|best)\s+(?:answer|option|choice)\s+is\s*)[\(\[]?([A-Z])[\)\]]?(?![A-Za-z])"
    ),
    re.compile(r"^\s*[\(\[]?([A-Z])[\)\].:]?\s*$"),  # the whole reply is one letter
    re.compile(r"^\s*[\(\[]([A-Z])[\)\]]"),  # reply starts with "(B) ..."
    re.compile(r"^\s*([A-Z])[.:)]\s"),  # reply starts with "B. ..." / "B) ..."
)


def parse_choice(reply: str, options: dict[str, str]) -> str:
    """Returns the option letter the reply commits to, else ``INVALID``.

    Args:
        reply: The model's final text.
        options: The question's options (letter -> text); letters outside them never count.
    """
    return locate_choice(reply, options)[0]


def locate_choice(reply: str, options: dict[str, str]) -> tuple[str, int | None]:
    """``parse_choice``'s letter and the offset of that letter in ``reply``.

    The offset is None when the reply is ``INVALID`` or names the option by its text rather than its letter;
    the gate reads the letter's probability at that offset (``medagent.agent.confidence``).
    """
    letters = set(options)
    if not reply.strip():
        return INVALID, None
    # 1) A JSON answer field (constrained decoding may be cut off before the closing brace).
    found = {m.group(1).upper(): m.start(1) for m in _JSON_FIELD.finditer(reply)}
    if found:
        if len(found) == 1 and set(found) <= letters:
            return next(iter(found.items()))
        return INVALID, None
    # 2) Explicit answer phrases, then bare-letter shapes.
    for pattern in _TIERS:
        hits: dict[str, int] = {}
        for m in pattern.finditer(reply):
            if m.group(1).upper() in letters:
                hits.setdefault(m.group(1).upper(), m.start(1))
        if len(hits) == 1:
            return next(iter(hits.items()))
        if len(hits) > 1:
            return INVALID, None  # the reply names several options with the same confidence
    # 3) The reply is exactly one option's text (a model that answers with the text, not the letter).
    norm = _normalize(reply)
    exact = [k for k, v in options.items() if _normalize(v) == norm]
    return (exact[0], None) if len(exact) == 1 else (INVALID, None)


def _normalize(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


__all__ = ["answer_model", "answer_schema", "locate_choice", "parse_choice", "parse_json_object"]


def answer_schema(letters: list[str]) -> dict[str, object]:
    """OpenAI ``response_format`` that constrains the reply to ``{"answer": <one letter>}``."""
    return response_format("answer", answer_model(letters))


def answer_model(letters: list[str]) -> type[Output]:
    """The output model of an answer call: one of ``letters`` (the reply itself is read by ``parse_choice``,
    whose ``INVALID`` rule a validation error must not replace)."""
    return create_model("Answer", __base__=Output, answer=(enum_str(letters), ...))
