"""The fact store: one interview's atomic facts, each with the patient's own words, cached on disk.

A **fact** is one atomic thing the real patient stated (a finding and its polarity, or one detail of it:
onset, duration, severity...; a past illness, medication, allergy, family illness, social habit, travel,
exposure), a short ``statement`` of it and the ``quote`` it rests on. A quote is accepted only when it is a
substring of one patient turn of the interview's visible part (``find_quote``: case and runs of whitespace
ignored); the fact then records that turn. A fact whose quote is found in no patient turn is set aside with
its reason and counted (``FactSet.set_aside``), never kept.

The set is cached as JSON under ``cache_dir`` keyed by the sha256 of the visible transcript, the extracting
model and the prompt's name and version (``cache_key``): every experiment arm reads the one fact set of an
interview, and a new prompt version or model makes a new set rather than reusing a stale one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from medagent.interview.types import Turn

CATEGORIES = (
    "complaint",
    "symptom",
    "onset",
    "duration",
    "severity",
    "character",
    "location",
    "modifier",
    "history",
    "medication",
    "allergy",
    "family",
    "social",
    "travel",
    "exposure",
    "demographic",
    "other",
)
POLARITIES = ("present", "absent", "uncertain")
_WS = re.compile(r"\s+")
_EDGE = "\"'“”‘’ .,;:!?"


def normalise(text: str) -> str:
    """Lower case, one space between words: the form quotes and turns are compared in."""
    return _WS.sub(" ", text).strip().lower()


def find_quote(quote: str, turns: Sequence[Turn]) -> int | None:
    """The index of the first patient turn that contains ``quote`` (``normalise``d, outer quote marks and
    punctuation stripped); None when no patient turn does or the quote has no word in it."""
    q = normalise(quote).strip(_EDGE)
    if not any(c.isalnum() for c in q):
        return None
    for t in turns:
        if t.speaker == "patient" and q in normalise(t.text):
            return t.index
    return None


@dataclass(frozen=True)
class Fact:
    """One atomic fact of a case (module docstring).

    Attributes:
        id: ``<interview>:F<n>``, stable within a fact set.
        category: One of ``CATEGORIES``.
        statement: The fact in a few words ("no fever").
        polarity: ``present``, ``absent`` or ``uncertain``.
        quote: The patient's verbatim words (a substring of turn ``turn``).
        turn: The index of the patient turn the quote is from.
    """

    id: str
    category: str
    statement: str
    polarity: str
    quote: str
    turn: int


@dataclass
class FactSet:
    """One interview's facts, with what was set aside and how they were made.

    Attributes:
        interview_id: The interview.
        key: ``cache_key`` of the transcript, model and prompt.
        model: The extracting model (``"annotation"`` for facts read from existing annotations).
        prompt: ``<name>@v<version>`` of the extraction prompt.
        facts: The accepted facts, in transcript order.
        set_aside: Items not kept, each ``{"statement", "quote", "reason"}``.
        errors: Malformed replies met during extraction, retried or not (an excerpt's items may be missing).
    """

    interview_id: str
    key: str
    model: str
    prompt: str
    facts: list[Fact] = field(default_factory=list)
    set_aside: list[dict[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FactSet:
        return cls(
            interview_id=d["interview_id"],
            key=d["key"],
            model=d["model"],
            prompt=d["prompt"],
            facts=[Fact(**f) for f in d.get("facts", [])],
            set_aside=list(d.get("set_aside", [])),
            errors=list(d.get("errors", [])),
        )

    def by_turn(self) -> dict[int, list[Fact]]:
        """The facts grouped by the patient turn their quote is from."""
        out: dict[int, list[Fact]] = {}
        for f in self.facts:
            out.setdefault(f.turn, []).append(f)
        return out


def transcript_hash(turns: Sequence[Turn]) -> str:
    text = "\n".join(f"{t.index}\t{t.speaker}\t{t.text}" for t in turns)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(turns: Sequence[Turn], model: str, prompt: str) -> str:
    """sha256 over the transcript's hash, the model and ``<prompt>@v<version>``."""
    return hashlib.sha256(f"{transcript_hash(turns)}|{model}|{prompt}".encode()).hexdigest()


def accept(interview_id: str, items: Sequence[dict[str, str]], turns: Sequence[Turn], out: FactSet) -> None:
    """Adds ``items`` (category, statement, polarity, quote) to ``out``: a fact when its quote is a patient's
    words and its fields are in range, else set aside with the reason. Duplicates (same statement and
    quote) are dropped silently: overlapping excerpts name the same fact twice."""
    seen = {(normalise(f.statement), normalise(f.quote)) for f in out.facts}
    for item in items:
        statement = " ".join(str(item.get("statement", "")).split())
        quote = " ".join(str(item.get("quote", "")).split()).strip(_EDGE)
        reason = None
        turn = find_quote(quote, turns) if quote else None
        if not statement:
            reason = "no statement"
        elif not quote:
            reason = "no quote"
        elif turn is None:
            reason = "quote not in any patient turn"
        elif item.get("category") not in CATEGORIES:
            reason = f"unknown category {str(item.get('category'))[:30]!r}"
        elif item.get("polarity") not in POLARITIES:
            reason = f"unknown polarity {str(item.get('polarity'))[:30]!r}"
        if reason is not None or turn is None:
            out.set_aside.append({"statement": statement, "quote": quote, "reason": reason or ""})
            continue
        if (normalise(statement), normalise(quote)) in seen:
            continue
        seen.add((normalise(statement), normalise(quote)))
        out.facts.append(
            Fact(
                id=f"{interview_id}:F{len(out.facts) + 1}",
                category=str(item["category"]),
                statement=statement,
                polarity=str(item["polarity"]),
                quote=quote,
                turn=turn,
            )
        )


@dataclass(frozen=True)
class FactCache:
    """Fact sets on disk, one JSON file per (interview, key)."""

    root: Path

    def path(self, interview_id: str, key: str) -> Path:
        return self.root / f"{interview_id}.{key[:16]}.json"

    def get(self, interview_id: str, key: str) -> FactSet | None:
        p = self.path(interview_id, key)
        if not p.exists():
            return None
        fs = FactSet.from_dict(json.loads(p.read_text(encoding="utf-8")))
        if fs.key != key:
            raise ValueError(f"{p}: holds key {fs.key[:16]}..., not {key[:16]}...")
        return fs

    def put(self, fs: FactSet) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        p = self.path(fs.interview_id, fs.key)
        # Each writer its own temporary name: workers in other processes may write the same set at once.
        tmp = p.with_name(f"{p.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_text(json.dumps(fs.to_dict(), indent=1), encoding="utf-8")
        tmp.replace(p)
        return p
