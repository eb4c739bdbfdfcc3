"""Portable run rows: a run's rows without the data set's text, so that they can be committed.

A run longer than one session cannot live under ``outputs/`` alone (it is git-ignored, and a fresh checkout
has none of it), yet its rows cannot be committed as they are: an interview row carries the physician's
closing statement and the patient's own words verbatim, and a QA row its question. Committed, they would
copy the shared data into the repository.

``Redactor`` replaces every run of ``min_run`` or more characters that a row copies from its sources (an
interview's turns) with a pointer ``[source, start, end]`` into them, and ``restore`` puts the text back from
the same sources, read again from the data root. A string with such a run becomes ``{"$p": [segment, ...]}``
where a segment is a literal string or a pointer. Shorter runs stay literal ("Yes.", "2 weeks"): they are
phrases, not the data set. The portable row keeps the SHA-256 of the original row (``$sha256``) and
``restore`` checks it, so a restored row is the row the run wrote, byte for byte in its JSON, or an error
that names it (the data root holds another version of the transcript).

A row's sources are more than its item's texts when it quotes an index: the documents it names (or its
trace names) are sources too, and the portable row lists their ids (``$docs``) so that a restore reads the
same documents in the same order, whatever the row's literal text happens to contain.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medagent.run.rundir import RunDir, atomic_write, seal_last_line

POINTER = "$p"
CHECKSUM = "$sha256"
DOCS = "$docs"
MIN_RUN = 24
_SEP = "\x00"  # never in a source or a row string: a match cannot span two sources


def row_checksum(row: dict[str, Any]) -> str:
    """SHA-256 of the row's canonical JSON (sorted keys): what ``restore`` must give back."""
    text = json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    # surrogatepass: a trace may hold a lone surrogate (written ASCII-escaped), which plain UTF-8 refuses.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class PortableRowError(ValueError):
    """A portable row that cannot be restored: its sources changed, or it is not a portable row."""


@dataclass(frozen=True)
class RowSources:
    """What one row may copy from: ``texts`` in a fixed order, and the ids of the index documents among
    them (``docs``, written to the portable row as ``$docs``; empty when the row quotes no index)."""

    texts: Sequence[str]
    docs: tuple[str, ...] = ()


class Redactor:
    """Moves runs of text copied from ``sources`` out of a row, and back (module docstring).

    Args:
        sources: The texts a row may copy from, in a fixed order (an interview's turns, by index).
        min_run: Shortest copied run replaced with a pointer.
    """

    def __init__(self, sources: Sequence[str], min_run: int = MIN_RUN) -> None:
        if min_run < 1:
            raise ValueError(f"min_run must be >= 1, got {min_run}")
        if any(_SEP in s for s in sources):
            raise PortableRowError("a source text contains NUL")
        self.sources = list(sources)
        self.min_run = min_run
        self._big = _SEP.join(self.sources)
        self._starts: list[int] = []
        pos = 0
        for s in self.sources:
            self._starts.append(pos)
            pos += len(s) + 1
        # Every min_run-gram of the sources: an O(1) first test before the binary search.
        grams = (self._big[i : i + min_run] for i in range(len(self._big) - min_run + 1))
        self._grams = {g for g in grams if _SEP not in g}

    # Strings -------------------------------------------------------------------------------------
    def _longest(self, s: str, p: int) -> int:
        """Length of the longest prefix of ``s[p:]`` found in one source (0 when under ``min_run``)."""
        if s[p : p + self.min_run] not in self._grams:
            return 0
        nul = s.find(_SEP, p)  # a run never takes a NUL of the row: it would match across two sources
        lo, hi = self.min_run, (nul if nul >= 0 else len(s)) - p  # lo is found, and so is every shorter one
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if s[p : p + mid] in self._big:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _pointer(self, text: str) -> list[int]:
        at = self._big.find(text)
        i = bisect.bisect_right(self._starts, at) - 1
        start = at - self._starts[i]
        return [i, start, start + len(text)]

    def redact_text(self, s: str) -> str | dict[str, list[Any]]:
        """``s`` itself when it copies no run of ``min_run`` characters, else its segments."""
        segments: list[Any] = []
        literal: list[str] = []
        p = 0
        while p < len(s):
            n = self._longest(s, p)
            if n:
                if literal:
                    segments.append("".join(literal))
                    literal = []
                segments.append(self._pointer(s[p : p + n]))
                p += n
            else:
                literal.append(s[p])
                p += 1
        if not any(isinstance(seg, list) for seg in segments):
            return s
        if literal:
            segments.append("".join(literal))
        return {POINTER: segments}

    def restore_text(self, value: dict[str, list[Any]]) -> str:
        segments = value[POINTER]
        if not isinstance(segments, list):
            raise PortableRowError(f"not a list of segments: {segments!r}")
        out = []
        for seg in segments:
            if isinstance(seg, str):
                out.append(seg)
                continue
            if not (isinstance(seg, list) and len(seg) == 3 and all(type(x) is int for x in seg)):
                raise PortableRowError(f"not a segment (a string or [source, start, end]): {seg!r}")
            i, start, end = seg
            if not (0 <= i < len(self.sources) and 0 <= start <= end <= len(self.sources[i])):
                raise PortableRowError(f"pointer {seg} is outside the sources ({len(self.sources)} texts)")
            out.append(self.sources[i][start:end])
        return "".join(out)

    # Rows ----------------------------------------------------------------------------------------
    def redact(self, row: dict[str, Any]) -> dict[str, Any]:
        """The portable form of ``row``: every copied run a pointer, and the original's checksum."""
        portable = self._walk(row, self.redact_text, check=True)
        return {CHECKSUM: row_checksum(row), **portable}

    def restore(self, portable: dict[str, Any]) -> dict[str, Any]:
        """The row ``redact`` was given.

        Raises:
            PortableRowError: No checksum, a pointer outside the sources, or a restored row whose checksum
                differs (the sources are not the ones the row was made from).
        """
        if CHECKSUM not in portable:
            raise PortableRowError(f"not a portable row (no {CHECKSUM!r} key)")
        body = {k: v for k, v in portable.items() if k not in (CHECKSUM, DOCS)}
        row = self._walk(body, None, check=False)
        if row_checksum(row) != portable[CHECKSUM]:
            raise PortableRowError(
                "the restored row's checksum differs from the original's: the source texts are not the ones "
                "the row was made from"
            )
        return row

    def _walk(self, obj: Any, redact: Any, *, check: bool) -> Any:
        if isinstance(obj, dict):
            if set(obj) == {POINTER} and redact is None:
                return self.restore_text(obj)
            if check and (POINTER in obj or CHECKSUM in obj or DOCS in obj):
                raise PortableRowError(f"a row already has a {POINTER!r}, {CHECKSUM!r} or {DOCS!r} key")
            return {k: self._walk(v, redact, check=check) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self._walk(v, redact, check=check) for v in obj]
        if isinstance(obj, str) and redact is not None:
            return redact(obj)
        return obj


# Run directories -----------------------------------------------------------------------------------------
SourcesFor = Callable[[Path, list[dict[str, Any]]], Callable[[dict[str, Any]], RowSources]]
"""Given a rows file (of the run being exported or restored into) and its rows, a function from one row to
its sources (the data set is read once per file). On restore the row is the portable one: its documents are
the ones its ``$docs`` lists."""
TRACES = "traces"
TRACE_ROWS = "traces.portable.jsonl"  # a run dir's ``traces/*.json``, one line per file, beside its rows
FILE = "$file"


@dataclass
class PortableFile:
    """What ``export_run`` / ``restore_run`` did to one rows file (path relative to the run)."""

    path: str
    rows: int
    written: int


def _row_files(root: Path, names: Sequence[str]) -> list[Path]:
    return sorted(p for name in names for p in root.rglob(name) if p.is_file())


def _line(row: dict[str, Any]) -> str:
    text = json.dumps(row, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a trace's): escaped, as the run wrote it
        text = json.dumps(row)
    return text + "\n"


def _dump(rows: Sequence[dict[str, Any]]) -> str:
    return "".join(_line(r) for r in rows)


def _portable(row: dict[str, Any], sources: RowSources, min_run: int) -> dict[str, Any]:
    out = Redactor(sources.texts, min_run).redact(row)
    return out | {DOCS: list(sources.docs)} if sources.docs else out


def _restored(portable: dict[str, Any], sources: RowSources) -> dict[str, Any]:
    return Redactor(sources.texts).restore(portable)


def _append(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Appends (fsynced) after a whole last line: a run writing the same file meanwhile loses nothing."""
    seal_last_line(path)
    with open(path, "a", encoding="utf-8") as f:
        f.write(_dump(rows))
        f.flush()
        os.fsync(f.fileno())


def export_run(
    run_root: Path,
    out_root: Path,
    sources_for: SourcesFor,
    *,
    row_files: Sequence[str],
    copy_files: Sequence[str] = ("manifest.json",),
    min_run: int = MIN_RUN,
) -> list[PortableFile]:
    """Writes the portable form of every ``row_files`` file under ``run_root`` to the same relative path
    under ``out_root`` (rows in order, a partial last line left out), the trace files beside them as one
    ``traces.portable.jsonl``, and copies ``copy_files``. Reports are not exported: they are rebuilt from the
    restored rows."""
    rd = RunDir(run_root, read_only=True)
    out: list[PortableFile] = []
    dirs: set[Path] = set()
    for path in _row_files(rd.root, row_files):
        rows = rd.load_records(path)
        source_of = sources_for(path, rows)
        target = out_root / path.relative_to(rd.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, _dump([_portable(r, source_of(r), min_run) for r in rows]))
        for name in copy_files:
            if (path.parent / name).is_file():
                shutil.copyfile(path.parent / name, target.parent / name)
        out.append(PortableFile(str(path.relative_to(rd.root)), len(rows), len(rows)))
        dirs.add(path.parent)
    if not out:
        raise FileNotFoundError(f"no {' or '.join(row_files)} under {run_root}")
    for d in sorted(dirs):
        files = sorted((d / TRACES).glob("*.json"))
        if not files:
            continue
        traces = [json.loads(f.read_text(encoding="utf-8")) for f in files]
        if any(FILE in t for t in traces):
            raise PortableRowError(f"a trace under {d / TRACES} has a {FILE!r} key")
        source_of = sources_for(d / TRACES, traces)
        lines = [
            {FILE: f.name} | _portable(t, source_of(t), min_run) for f, t in zip(files, traces, strict=True)
        ]
        rel = (d / TRACE_ROWS).relative_to(rd.root)
        atomic_write(out_root / rel, _dump(lines))
        out.append(PortableFile(str(rel), len(lines), len(lines)))
    return out


def restore_run(
    portable_root: Path,
    run_root: Path,
    sources_for: SourcesFor,
    *,
    row_files: Sequence[str],
    copy_files: Sequence[str] = ("manifest.json",),
) -> list[PortableFile]:
    """Restores the rows of ``portable_root`` into ``run_root``: a run file that holds a prefix of the
    portable rows gets the rest appended, one that holds them all (or more) gets nothing, and one that
    holds other rows is an error. So a restore never duplicates or reorders a row and can be repeated;
    the run then resumes with those rows done. Trace files are written where the run has none, and
    ``copy_files`` copied where the run has none (first, so that ``sources_for`` can read the manifest).

    Raises:
        PortableRowError: A row cannot be restored (``Redactor.restore``), a run file holds rows the
            portable file does not, or a trace file differs from the portable one.
    """
    out: list[PortableFile] = []
    traced: set[Path] = set()
    for src in _row_files(portable_root, row_files):
        rel = src.relative_to(portable_root)
        portable = RunDir(portable_root, read_only=True).load_records(src)
        target = run_root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        for name in copy_files:
            if (src.parent / name).is_file() and not (target.parent / name).exists():
                shutil.copyfile(src.parent / name, target.parent / name)
        have = [row_checksum(r) for r in RunDir(run_root, read_only=True).load_records(target)]
        want = [str(p.get(CHECKSUM)) for p in portable]
        k = min(len(have), len(want))
        if have[:k] != want[:k]:
            i = next(j for j in range(k) if have[j] != want[j])
            raise PortableRowError(
                f"{target} and {src} differ at row {i + 1}: the run dir holds other rows than the portable "
                "copy (restore into an empty or matching run dir)"
            )
        todo = portable[len(have) :]
        if todo:
            source_of = sources_for(target, todo)
            _append(target, [_restored(p, source_of(p)) for p in todo])
        out.append(PortableFile(str(rel), len(portable), len(todo)))
        if src.parent not in traced:  # one traces file per run dir, however many row files it has
            traced.add(src.parent)
            out += _restore_traces(src.parent / TRACE_ROWS, target.parent, sources_for, rel.parent)
    if not out:
        raise FileNotFoundError(f"no {' or '.join(row_files)} under {portable_root}")
    return out


def _restore_traces(src: Path, run_dir: Path, sources_for: SourcesFor, rel: Path) -> list[PortableFile]:
    if not src.is_file():
        return []
    lines = RunDir(src.parent, read_only=True).load_records(src)
    traces = run_dir / TRACES
    traces.mkdir(parents=True, exist_ok=True)
    todo = []
    for line in lines:
        name = str(line.get(FILE))
        if not name.endswith(".json") or Path(name).name != name or name.startswith("."):
            raise PortableRowError(f"{src}: {name!r} is not a trace file name")
        path = traces / name
        if not path.exists():
            todo.append(line)
        elif row_checksum(json.loads(path.read_text(encoding="utf-8"))) != line[CHECKSUM]:
            raise PortableRowError(f"{path} differs from its portable copy in {src}")
    if todo:
        source_of = sources_for(traces, todo)
        for line in todo:
            body = {k: v for k, v in line.items() if k != FILE}
            # RunDir.append_predictions writes traces with indent=1: the restored file is the same bytes.
            atomic_write(traces / str(line[FILE]), json.dumps(_restored(body, source_of(body)), indent=1))
    return [PortableFile(str(rel / TRACE_ROWS), len(lines), len(todo))]
