"""The run directory: the only place that knows the names of a run's files.

``predictions.jsonl`` is the commit log of a run: a question counts as done once its line is written
(its trace file is written first). A rerun with the same directory skips those ids, so an interrupted
run resumes without losing or duplicating results. A line cut short by a kill is dropped on open.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from medagent.types import Gold, Prediction, Question, Rejected


def atomic_write(path: Path, text: str) -> None:
    """Writes a whole file (fsynced) under a temporary name of this process, then renames it into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL file. Only ``\\n`` ends a line: ``json.dumps(..., ensure_ascii=False)`` writes
    U+2028, U+2029 and U+0085 unescaped, and ``str.splitlines`` would cut a record at them."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def seal_last_line(path: Path) -> None:
    """Makes ``path`` end with a whole line before it is appended to. A last line without its newline is
    kept, with the newline added, when it parses (the record was written, its newline was not); otherwise
    it was cut short by a kill and is dropped. ``load_records`` reads the same file the same way."""
    if not path.exists():
        return
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    cut = data.rfind(b"\n") + 1
    try:
        json.loads(data[cut:].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        with open(path, "r+b") as f:
            f.truncate(cut)
        return
    with open(path, "ab") as f:
        f.write(b"\n")


class RunDir:
    """Files of one run. Create with ``RunDir.create`` or open an existing path directly.

    ``read_only=True`` opens a run for reading (reports): nothing is created or repaired, so a run that is
    still being written is never touched; a partial last prediction line is skipped instead.
    """

    def __init__(self, root: str | Path, *, read_only: bool = False) -> None:
        self.root = Path(root).resolve()
        if read_only:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self.traces_dir.mkdir(exist_ok=True)
        self._repair_predictions()

    @classmethod
    def create(cls, run_dir: str | None, outputs_root: str | Path, name: str) -> RunDir:
        """Opens ``run_dir`` when given, else a fresh ``<outputs_root>/<name>/<timestamp>``."""
        if run_dir:
            return cls(run_dir)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        return cls(Path(outputs_root).resolve() / safe / stamp)

    # Named paths -------------------------------------------------------------------------------
    @property
    def predictions(self) -> Path:
        return self.root / "predictions.jsonl"

    @property
    def golds(self) -> Path:
        return self.root / "golds.jsonl"

    @property
    def questions(self) -> Path:
        """What the agent was asked (text and options; no labels), for readers of the run (the viewer)."""
        return self.root / "questions.jsonl"

    @property
    def rejected(self) -> Path:
        return self.root / "rejected.jsonl"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.json"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def traces_dir(self) -> Path:
        return self.root / "traces"

    @property
    def annotations(self) -> Path:
        """Interview annotations (``annotate_interviews``): one ``Annotation.to_dict()`` per line."""
        return self.root / "annotations.jsonl"

    @property
    def gold_annotations(self) -> Path:
        """The same annotator's output on the gold MediTOD dialogues (scored into ``annotation_eval.*``)."""
        return self.root / "gold_annotations.jsonl"

    @property
    def annotation_eval_md(self) -> Path:
        return self.root / "annotation_eval.md"

    @property
    def annotation_eval_csv(self) -> Path:
        return self.root / "annotation_eval.csv"

    @property
    def interviews(self) -> Path:
        """History-taking runs (``run_interviews``): one evaluated interview per line, keyed by interview id."""
        return self.root / "interviews.jsonl"

    @property
    def interviews_csv(self) -> Path:
        """Per-interview metrics of a history-taking run."""
        return self.root / "interviews.csv"

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"

    @property
    def figures_dir(self) -> Path:
        return self.root / "figures"

    def trace_path(self, question_id: str) -> Path:
        return self.traces_dir / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', question_id)}.json"

    # Predictions -------------------------------------------------------------------------------
    def _repair_predictions(self) -> None:
        """Drops a trailing partial line left by a process killed mid-write (``seal_last_line``)."""
        seal_last_line(self.predictions)

    def completed_ids(self) -> set[str]:
        """Questions answered for good. A prediction with ``error`` (an endpoint failure, not an INVALID
        answer) is not: a rerun asks it again and the new line supersedes it."""
        return {p.id for p in self.load_predictions() if p.error is None}

    def append_predictions(self, preds: Iterable[Prediction]) -> int:
        """Writes traces, then prediction lines (flushed and fsynced); returns how many were new."""
        done = self.completed_ids()
        n = 0
        with open(self.predictions, "a", encoding="utf-8") as f:
            for pred in preds:
                if pred.id in done:  # e.g. a retried batch that had already been written
                    continue
                record = pred.to_dict()
                trace = record.pop("trace")
                atomic_write(self.trace_path(pred.id), json.dumps({"id": pred.id, "trace": trace}, indent=1))
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
                if pred.error is None:
                    done.add(pred.id)
                n += 1
            f.flush()
            os.fsync(f.fileno())
        return n

    def load_predictions(self, with_traces: bool = False) -> list[Prediction]:
        if not self.predictions.exists():
            return []
        kept: dict[str, Prediction] = {}  # insertion order: the order questions were first written
        lines = jsonl_lines(self.predictions.read_text(encoding="utf-8"))
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if i == len(lines) - 1:  # being written by a running process (a read-only open)
                    continue
                raise
            pred = Prediction.from_dict(record)
            if pred.id in kept and kept[pred.id].error is None:
                continue  # answered for good: a later line can only be a duplicate
            kept[pred.id] = pred  # first answer, or one superseding an endpoint failure
        out = list(kept.values())
        if with_traces:
            for pred in out:
                if self.trace_path(pred.id).exists():
                    pred.trace = json.loads(self.trace_path(pred.id).read_text())["trace"]
        return out

    # Generic JSONL commit logs (annotations...) -------------------------------------------------
    def load_records(self, path: Path) -> list[dict[str, Any]]:
        """The JSON lines of ``path``; a line cut short by a kill (the last one) is ignored."""
        if not path.exists():
            return []
        out = []
        lines = jsonl_lines(path.read_text(encoding="utf-8"))
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                if i == len(lines) - 1:
                    continue
                raise
        return out

    def latest_records(
        self, path: Path, key: str = "id", failed: Callable[[dict[str, Any]], bool] | None = None
    ) -> list[dict[str, Any]]:
        """One record per ``key``: the first, unless it ``failed`` (an endpoint failure): then a later
        record of the same key supersedes it (the rerun that asked again)."""
        kept: dict[str, dict[str, Any]] = {}
        for r in self.load_records(path):
            k = str(r[key])
            if k not in kept or (failed is not None and failed(kept[k])):
                kept[k] = r
        return list(kept.values())

    def completed_keys(
        self, path: Path, key: str = "id", failed: Callable[[dict[str, Any]], bool] | None = None
    ) -> set[str]:
        """Keys done for good: a record that ``failed`` is asked again by the next run."""
        return {
            str(r[key]) for r in self.latest_records(path, key, failed) if failed is None or not failed(r)
        }

    def append_records(
        self,
        path: Path,
        records: Iterable[dict[str, Any]],
        key: str = "id",
        failed: Callable[[dict[str, Any]], bool] | None = None,
    ) -> int:
        """Appends records whose ``key`` is not done in ``path`` yet (fsynced); returns how many were new.
        A record that ``failed`` leaves its key open, so the next run's record for it is written too.

        A partial last line left by a kill is cut off first (``seal_last_line``), so the file stays one record
        per line.
        """
        seal_last_line(path)
        done = self.completed_keys(path, key, failed)
        n = 0
        with open(path, "a", encoding="utf-8") as f:
            for rec in records:
                k = str(rec[key])
                if k in done:
                    continue
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                if failed is None or not failed(rec):
                    done.add(k)
                n += 1
            f.flush()
            os.fsync(f.fileno())
        return n

    # Golds, rejected rows, JSON documents -------------------------------------------------------
    def write_golds(self, golds: Iterable[Gold]) -> None:
        atomic_write(self.golds, "".join(json.dumps(g.to_dict(), ensure_ascii=False) + "\n" for g in golds))

    def write_questions(self, questions: Iterable[Question]) -> None:
        lines = (json.dumps(q.to_dict(), ensure_ascii=False) + "\n" for q in questions)
        atomic_write(self.questions, "".join(lines))

    def load_questions(self) -> dict[str, Question]:
        """Questions by id; empty for runs written before ``questions.jsonl`` existed."""
        return {q.id: q for q in (Question.from_dict(r) for r in self.load_records(self.questions))}

    def load_golds(self) -> dict[str, Gold]:
        if not self.golds.exists():
            return {}
        golds = (
            Gold.from_dict(json.loads(x)) for x in jsonl_lines(self.golds.read_text(encoding="utf-8")) if x
        )
        return {g.id: g for g in golds}

    def write_rejected(self, rows: Iterable[Rejected]) -> int:
        lines = [json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in rows]
        atomic_write(self.rejected, "".join(lines))
        return len(lines)

    def write_json(self, path: Path, obj: Any) -> None:
        atomic_write(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")

    def read_json(self, path: Path) -> Any:
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
