"""The reference: the physician's own closing statement (likely diagnosis, plan), cut out of the interview.

**Rule** (chosen after reading the ends of many OSCE transcripts, which close with a wrap-up question such
as "any questions for me?", then one or more long doctor turns explaining what it probably is and what
happens next, interleaved with short patient acknowledgements and courtesies). Walking back from the last
turn, over at most ``max_tail_turns`` turns, each doctor turn is classed as

* a **closing turn**: at least ``min_words`` words, an assessment or plan cue (``CLOSING_CUE``: "we will",
  "sounds like", "most likely", "rule out", "swab", "test", "refer", "plan"...) and not mainly a history
  question (no question sentence, a wrap-up question, or question sentences under half of its words);
* a **history question**: it asks something (``annotate.questions.question_text``) that is not a wrap-up
  (``WRAP_UP``: "anything else", "any questions", "those were all the questions"...); the walk stops here;
* anything else (courtesies, short acknowledgements): skipped.

The statement is the closing turns in order, joined; it is *usable* when it has at least
``min_total_words`` words. The simulator sees the interview up to the first closing turn (exclusive):
everything from there on is hidden from it. On the 272 OSCE transcripts (the copy in
``../shared/data``) the rule finds a usable statement in 247; the others end on history questions or a
bare goodbye (e.g. the CAR and GAS files, some RES files that stop before the plan).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BeforeValidator, create_model

from medagent.interview.annotate.questions import question_text
from medagent.interview.transcripts import Interview
from medagent.interview.types import Turn
from medagent.llm.structured import Output, capped_list, capped_str, enum_str

CLOSING_CUE = re.compile(
    r"\b(?:we(?:'ll| will| would| want to| can| could| should| are going to|'re going to| need to)|"
    r"i(?:'ll| will| would|'d) (?:like to |want to )?(?:order|get|do|start|give|prescribe|refer|send|recommend)|"
    r"(?:sounds|seems|looks) like|most likely|likely|possib(?:le|ly|ility)|could be|might be|diagnos\w*|"
    r"rule (?:it |that |this )?out|differential|plan|next steps?|investigations?|swab|tests?|testing|"
    r"x-?rays?|blood ?work|imaging|prescri\w*|refer\w*|treat\w*|antibiotics?|isolat\w*|follow[- ]up|"
    r"physical exam|recommend\w*|manage\w*)\b",
    re.IGNORECASE,
)
WRAP_UP = re.compile(
    r"\banything else\b|\bany (?:other )?(?:questions|concerns)\b|\bquestions (?:for me|of your own|for myself)\b|"
    r"\b(?:those|these) (?:are|were) (?:all |just all )?(?:of )?the questions\b|\bthat(?:'s| is| was) all\b|"
    r"\bsounds? good\b|\bmake sense\b|\bhave a (?:good|great|nice)\b|\bthank\w*|\bi missed\b|\bforgot\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ClosingRule:
    min_words: int = 12
    min_total_words: int = 15
    max_tail_turns: int = 20


@dataclass(frozen=True)
class Reference:
    """The physician's closing statement of one interview.

    Attributes:
        interview_id: The interview.
        statement: The closing turns joined ('' when none was found).
        turns: Indices of the closing turns.
        visible_until: Turns ``[0, visible_until)`` are what the simulator may see.
        usable: Whether ``statement`` has enough words to score against.
    """

    interview_id: str
    statement: str
    turns: tuple[int, ...]
    visible_until: int
    usable: bool

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"turns": list(self.turns)}


def _words(text: str) -> int:
    return len(text.split())


def classify_doctor_turn(text: str, rule: ClosingRule) -> str:
    """``closing``, ``question`` or ``other`` (rule in the module docstring)."""
    q = question_text(text)
    wrap = q is not None and bool(WRAP_UP.search(q))
    n = _words(text)
    if CLOSING_CUE.search(text) and n >= rule.min_words and (q is None or wrap or _words(q) <= 0.5 * n):
        return "closing"
    if q is not None and not wrap:
        return "question"
    return "other"


def extract_reference(interview: Interview, rule: ClosingRule | None = None) -> Reference:
    """The closing statement of ``interview`` and where the simulator's view ends."""
    rule = rule or ClosingRule()
    turns = interview.turns
    closing: list[int] = []
    for i in range(len(turns) - 1, max(0, len(turns) - rule.max_tail_turns) - 1, -1):
        if turns[i].speaker != "doctor":
            continue
        kind = classify_doctor_turn(turns[i].text, rule)
        if kind == "question":
            break
        if kind == "closing":
            closing.append(i)
    closing.reverse()
    statement = " ".join(turns[i].text for i in closing)
    return Reference(
        interview_id=interview.id,
        statement=statement,
        turns=tuple(closing),
        visible_until=closing[0] if closing else len(turns),
        usable=_words(statement) >= rule.min_total_words,
    )


def _or_empty(value: Any) -> str:
    return str(value or "")


class FlagQuote(Output):
    """A red flag named by a model, with the patient's words that show it (checked by ``quote_supports``).
    Reading accepts any id and a missing quote: the caller drops and records what it cannot use."""

    id: str
    quote: Annotated[capped_str(200), BeforeValidator(_or_empty)] = ""  # type: ignore[valid-type]


@lru_cache(maxsize=32)
def flag_quote_model(ids: tuple[str, ...]) -> type[FlagQuote]:
    """``FlagQuote`` whose schema restricts ``id`` to the configured red flags."""
    return create_model("RedFlagQuote", __base__=FlagQuote, id=(enum_str(ids), ...))


def _flag_items(value: Any) -> Any:
    """The items that name a flag; the rest of a list are skipped, as a reader of the transcript would."""
    if not isinstance(value, list):
        return value
    return [f for f in value if isinstance(f, dict) and isinstance(f.get("id"), str)]


class RedFlagsReply(Output):
    """The reference extractor's reply (``history_red_flags``)."""

    red_flags: Annotated[list[FlagQuote], BeforeValidator(_flag_items)]


@lru_cache(maxsize=32)
def red_flags_model(ids: tuple[str, ...]) -> type[RedFlagsReply]:
    """``RedFlagsReply`` with the configured flags' schema: one entry per flag at most."""
    flags: Any = Annotated[capped_list(flag_quote_model(ids), len(ids)), BeforeValidator(_flag_items)]
    return create_model("RedFlags", __base__=RedFlagsReply, red_flags=(flags, ...))


def quote_supports(quote: str, patient_lines: Sequence[str]) -> bool:
    """Whether ``quote`` is the patient's own, affirmed words (the one evidence rule of both red-flag sides:
    the reference extractor's and the agent's per-turn update): its word tokens occur contiguously in one of
    ``patient_lines`` and no negation or uncertainty scope (NegEx-style, ``annotate.matcher``) covers them
    there ("no blood when I cough" does not support haemoptysis)."""
    from medagent.interview.annotate.matcher import Mention, polarity, tokenize, trigger_scopes

    want = [t for t in tokenize(quote) if t[0].isalnum()]
    if len(want) < 2 or any(kind != "pseudo" for *_, kind in trigger_scopes(want)):
        return False
    for line in patient_lines:
        toks = tokenize(line)
        words = [i for i, t in enumerate(toks) if t[0].isalnum()]
        scopes = trigger_scopes(toks)
        for k in range(len(words) - len(want) + 1):
            if [toks[i] for i in words[k : k + len(want)]] == want:
                span = Mention(words[k], words[k + len(want) - 1] + 1, (), quote)
                if polarity(span, scopes) == "positive":
                    return True
    return False


def visible_turns(interview: Interview, reference: Reference) -> tuple[Turn, ...]:
    """The turns the simulator and the single-shot baseline may see (the closing statement excluded)."""
    return interview.turns[: reference.visible_until]


def render_turns(turns: tuple[Turn, ...] | list[Turn]) -> str:
    return "\n".join(f"{t.speaker.capitalize()}: {t.text}" for t in turns)


def exchanges(turns: tuple[Turn, ...] | list[Turn]) -> list[str]:
    """The interview as exchanges: each run of doctor turns with the patient turns that answer it."""
    out: list[list[Turn]] = []
    for t in turns:
        if not out or (t.speaker == "doctor" and out[-1][-1].speaker == "patient"):
            out.append([t])
        else:
            out[-1].append(t)
    return [render_turns(x) for x in out]
