"""Fareez et al. (2022) OSCE transcripts: plain-text interviews with ``D:`` / ``P:`` speaker lines.

Format (``../shared/data/fareez_osce_transcripts/SOURCE.md``): one speaker turn per paragraph, prefixed
``D:`` (doctor) or ``P:`` (patient), blank lines between turns; mostly UTF-8 with CRLF, two files UTF-16-LE
with a BOM. Real files deviate in small ways, and parsing never fails on them; every deviation is kept
in ``Interview.issues`` so a reader can audit it:

- a line without a speaker prefix continues the previous turn (a hard-wrapped utterance);
- a prefix typed slightly wrong (``D;``, ``D :``, ``D"``, ``P.``, ``DL``, or ``P`` followed by a space and a
  capital) still opens a turn of that speaker;
- text before the first speaker line cannot be attributed to anyone and is dropped;
- undecodable bytes are replaced (U+FFFD).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medagent.interview.types import Turn

FAREEZ_DIR = "fareez_osce_transcripts"
SPEAKERS = {"D": "doctor", "P": "patient"}

_STANDARD = re.compile(r"^(?P<spk>[DP]):\s*(?P<text>.*)$")
# Typos seen in the corpus: "D;", "D :", 'D"', "P.", "DL OK", "P No." (a capital must follow a bare letter,
# so an ordinary continuation line starting with the word "P" or "D" is not mistaken for a speaker line).
_VARIANT = re.compile(r"^(?P<spk>[DP])(?:\s*[:;\".]|L?(?=\s+[A-Z\"']))\s*(?P<text>.*)$")


@dataclass(frozen=True)
class Interview:
    """One interview's text: what an annotator is allowed to see (never its gold labels).

    Attributes:
        id: ``RES0001`` (Fareez) or a MediTOD dialogue id such as ``115``.
        source: ``fareez`` or ``meditod``.
        turns: Utterances in order; ``Turn.index`` is the 0-based position.
        issues: Parse notes (odd lines, encoding), kept for audit; empty for a clean file.
    """

    id: str
    source: str
    turns: tuple[Turn, ...]
    issues: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source": self.source,
            "turns": [[t.speaker, t.text] for t in self.turns],
            "issues": list(self.issues),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Interview:
        turns = tuple(Turn(index=i, speaker=s, text=t) for i, (s, t) in enumerate(d["turns"]))
        return cls(id=str(d["id"]), source=d["source"], turns=turns, issues=tuple(d.get("issues") or ()))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, s: str) -> Interview:
        return cls.from_dict(json.loads(s))


def decode_transcript(raw: bytes) -> tuple[str, list[str]]:
    """Decodes by BOM (UTF-16 LE/BE, UTF-8 with or without BOM); returns the text and any issue."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16"), []
    try:
        return raw.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        return raw.decode("utf-8", errors="replace"), [f"not valid UTF-8 ({exc.reason}); bytes replaced"]


def parse_transcript(text: str, interview_id: str = "", source: str = "fareez") -> Interview:
    """Parses ``D:`` / ``P:`` text into turns; odd lines are handled and recorded, never raised.

    Args:
        text: The decoded transcript.
        interview_id: Id given to the result (e.g. the file stem).
        source: Source name recorded on the result.

    Returns:
        The interview with its turns and parse issues.
    """
    turns: list[tuple[str, int, list[str]]] = []  # speaker, opening line, text parts
    issues: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip().replace("\ufeff", "")
        if not stripped:
            continue
        m = _STANDARD.match(stripped)
        if m is None:
            m = _VARIANT.match(stripped)
            if m is not None:
                prefix = stripped[: m.start("text")].strip()
                issues.append(f"line {lineno}: nonstandard speaker prefix {prefix!r}")
        if m is not None:
            body = m["text"].strip()
            turns.append((SPEAKERS[m["spk"]], lineno, [body] if body else []))
        elif turns:
            turns[-1][2].append(stripped)
            issues.append(
                f"line {lineno}: continuation line joined to the turn opened on line {turns[-1][1]}"
            )
        else:
            issues.append(f"line {lineno}: text before the first speaker line dropped: {stripped[:60]!r}")
    out: list[Turn] = []
    for speaker, lineno, parts in turns:
        body = " ".join(parts).strip()
        if not body:
            issues.append(f"line {lineno}: empty {speaker} turn dropped")
            continue
        out.append(Turn(index=len(out), speaker=speaker, text=body))
    return Interview(id=interview_id, source=source, turns=tuple(out), issues=tuple(issues))


def read_transcript(path: str | Path) -> Interview:
    """Reads and parses one transcript file; the id is the file stem (``RES0001``)."""
    p = Path(path)
    text, decode_issues = decode_transcript(p.read_bytes())
    parsed = parse_transcript(text, interview_id=p.stem, source="fareez")
    if not decode_issues:
        return parsed
    return Interview(parsed.id, parsed.source, parsed.turns, tuple(decode_issues) + parsed.issues)


def transcripts_dir(data_root: str | Path | None = None) -> Path:
    """The transcript folder under the data root (found with ``resolve_data_root`` when ``None``)."""
    from medagent.data import resolve_data_root

    folder = resolve_data_root(data_root) / FAREEZ_DIR
    if not folder.is_dir():
        raise FileNotFoundError(f"no {FAREEZ_DIR}/ under the data root {folder.parent}")
    return folder


def list_interviews(prefix: str | None = None, data_root: str | Path | None = None) -> list[Path]:
    """Transcript files whose id starts with ``prefix`` (``RES``, ``MSK``...; all when ``None``), sorted."""
    files = sorted(transcripts_dir(data_root).glob("*.txt"))
    if prefix:
        files = [f for f in files if f.stem.upper().startswith(prefix.upper())]
    return files


def load_transcripts(
    prefix: str | None = None,
    data_root: str | Path | None = None,
    *,
    ids: list[str] | None = None,
    limit: int | None = None,
) -> tuple[list[Interview], list[Path]]:
    """Parses the transcripts selected by ``prefix`` (and ``ids`` when given), first ``limit`` in id order.

    Returns:
        The interviews and the files read (for the run manifest's checksums).

    Raises:
        FileNotFoundError: The folder is missing, or an id in ``ids`` has no file.
    """
    files = list_interviews(prefix, data_root)
    if ids:
        by_id = {f.stem: f for f in files}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise FileNotFoundError(f"no transcript for id(s) {missing} (prefix={prefix!r})")
        files = [by_id[i] for i in ids]
    if limit is not None:
        files = files[:limit]
    return [read_transcript(f) for f in files], files
