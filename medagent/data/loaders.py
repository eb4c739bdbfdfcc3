"""Built-in benchmark loaders (registered on import) and their Hugging Face hub siblings.

Each loader reshapes one source format into normalized candidate rows; checking is left to
``medagent.data.validate``. Paths are relative to the data root (``shared/data``, see each folder's
``SOURCE.md``). Ids are stable: they come from the source (PMID, BioASQ id, MedExpQA ``idx``) or from the
record's position in its file, never from filtering.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import string
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from medagent.data.base import LoadContext, Loader, register_benchmark
from medagent.data.validate import RawRow

Mapper = Callable[[int, dict[str, Any]], dict[str, Any]]

YES_NO = {"A": "yes", "B": "no"}
YES_NO_MAYBE = {"A": "yes", "B": "no", "C": "maybe"}


def _letter(label: Any, options: dict[str, str]) -> Any:
    """Map a label ("Yes", "no", ...) to its option letter; anything else passes through for the validator."""
    if not isinstance(label, str):
        return label
    return next((k for k, v in options.items() if v == label.strip().lower()), label)


def iter_jsonl(path: Path) -> Iterator[RawRow]:
    """Yield one ``RawRow`` per non-blank line of ``path`` (``row`` = 1-based line number).

    A line that is not UTF-8 or not JSON becomes a row carrying that rejection reason.
    """
    with path.open("rb") as fh:
        for line_no, line in enumerate(fh, 1):
            if line_no == 1 and line.startswith(codecs.BOM_UTF8):
                line = line[len(codecs.BOM_UTF8) :]
            if not line.strip():
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                # One bad line must not cost the whole file: refuse it, keep reading.
                yield RawRow(line_no, line[:200], error=f"not UTF-8 (byte {exc.start} of the line)")
                continue
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                yield RawRow(line_no, text, error=f"invalid JSON ({exc.msg}, column {exc.colno})")
                continue
            yield RawRow(line_no, data)


def _map_rows(rows: Iterable[RawRow], fn: Mapper) -> Iterator[RawRow]:
    """Apply ``fn(index, record)`` to parsed dict rows; errors and non-objects go on to the validator."""
    for raw in rows:
        if raw.error is None and isinstance(raw.data, dict):
            yield RawRow(raw.row, fn(raw.row - 1, raw.data))
        else:
            yield raw


def _read_json(path: Path) -> Any:
    # A whole-file JSON benchmark that does not parse cannot be partly loaded; fail loudly with the path.
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc


def _enumerate(items: Iterable[Any], fn: Mapper) -> Iterator[RawRow]:
    """Rows from an in-memory sequence of records: ``row`` is 1-based, ``fn`` gets the 0-based index."""
    return _map_rows((RawRow(i + 1, item) for i, item in enumerate(items)), fn)


def parse_choices(choices: str) -> dict[str, str]:
    """Split a USMLE ``choices`` string ``"(A) ... (B) ..."`` into ``{"A": ..., "B": ...}``.

    Markers are sought in letter order, each after the previous one, so ``(X)`` inside an option only
    counts if X is the next letter. A marker after whitespace is preferred (the data has ``Rh o(D) immune
    globulin (D) Amniocentesis``); a glued one (``gadolinium(D) CT angiography``) is used only when no
    such marker follows.

    Args:
        choices: The raw string.

    Returns:
        Letter -> stripped option text; empty when no ``(A)`` marker is found.
    """
    marks: list[tuple[str, int, int]] = []
    pos = 0
    for letter in string.ascii_uppercase:
        found = re.compile(rf"(?:^|(?<=\s))\({letter}\)").search(choices, pos)
        found = found or re.compile(rf"\({letter}\)").search(choices, pos)
        if found is None:
            break
        marks.append((letter, found.start(), found.end()))
        pos = found.end()
    ends = [start for _, start, _ in marks[1:]] + [len(choices)] if marks else []
    return {letter: choices[end:stop].strip() for (letter, _, end), stop in zip(marks, ends, strict=True)}


def _usmle_rows(path: Path, step: str, source: str | None) -> Iterator[RawRow]:
    def to_row(index: int, item: dict[str, Any]) -> dict[str, Any]:
        choices = item.get("choices")
        answer = item.get("answer_id")
        return {
            "id": f"{step}-{index}",
            "question": item.get("question"),
            "options": parse_choices(choices) if isinstance(choices, str) else choices,
            "answer": answer.strip() if isinstance(answer, str) else answer,
            "metadata": {k: item.get(k) for k in ("source", "question_number", "question_type", "meta_info")},
        }

    items = _read_json(path)
    if not isinstance(items, list):
        raise ValueError(f"{path}: expected a JSON array of questions")
    for raw in _enumerate(items, to_row):
        # Filter after mapping so ids keep the position in the whole file.
        if source is None or (isinstance(raw.data, dict) and source in str(raw.data["metadata"]["source"])):
            yield raw


def _usmle_loader(name: str, step: str, filename: str) -> Loader:
    @register_benchmark(name)
    def load(ctx: LoadContext, source: str | None = None) -> Iterator[RawRow]:
        return _usmle_rows(ctx.file(f"usmle_sample_exam/{filename}"), step, source)

    load.__name__ = f"load_{name}"
    # Option ``source``: keep only items whose release (``source`` field) contains it, e.g. "Jan 2024".
    load.__doc__ = f"USMLE sample exam ``{filename}``; ids ``{step}-<position in file>``; option ``source``."
    return load


load_usmle_step1 = _usmle_loader("usmle_step1", "step1", "USMLE_STEP_1.json")
load_usmle_step2 = _usmle_loader("usmle_step2", "step2", "USMLE_STEP_2.json")
load_usmle_step3 = _usmle_loader("usmle_step3", "step3", "USMLE_STEP_3.json")
load_usmle_ethics = _usmle_loader("usmle_ethics", "ethics", "USMLE_ethics.json")


def _medqa_row(index: int, rec: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"medqa-{index}",
        "question": rec.get("question"),
        "options": rec.get("options"),
        "answer": rec.get("answer_idx"),
        "answer_text": rec.get("answer"),
        "metadata": {"meta_info": rec.get("meta_info")},
    }


@register_benchmark("medqa")
def load_medqa(ctx: LoadContext, path: str = "medqa_us/phrases_no_exclude_test.jsonl") -> Iterator[RawRow]:
    """MedQA-USMLE 4-option test set (1,273); ids ``medqa-<line index>``.

    Args:
        ctx: Load context.
        path: The JSONL file, relative to the data root.
    """
    return _map_rows(iter_jsonl(ctx.file(path)), _medqa_row)


def _drop_none_options(options: Any) -> Any:
    # 67 of 125 items pad a 4-option question with "E": "None"; a dummy option is not an answer choice.
    if isinstance(options, dict):
        options = {k: v for k, v in options.items() if v is not None and str(v).strip() != "None"}
    return options


@register_benchmark("medexpqa")
def load_medexpqa(
    ctx: LoadContext,
    path: str = "medexpqa_en/medexpqa_en_test.jsonl",
    explanations_path: str | None = "medexpqa_en/medexpqa_en_test_explanations_from_casimedicos_arg.jsonl",
) -> Iterator[RawRow]:
    """MedExpQA English test set (125); ids ``medexpqa-<idx>``; explanations joined by ``idx`` (118 have one).

    Args:
        ctx: Load context.
        path: The questions JSONL, relative to the data root.
        explanations_path: The derived explanations JSONL, or ``None`` to load without explanations.
    """
    questions = ctx.file(path)
    explanations: dict[Any, Any] = {}
    if explanations_path is not None:
        for raw in iter_jsonl(ctx.file(explanations_path)):
            if raw.error is None and isinstance(raw.data, dict) and "idx" in raw.data:
                explanations[raw.data["idx"]] = raw.data.get("explanation")

    def to_row(_: int, rec: dict[str, Any]) -> dict[str, Any]:
        idx = rec.get("idx")
        return {
            "id": None if idx is None else f"medexpqa-{idx}",
            "question": rec.get("question"),
            "options": _drop_none_options(rec.get("options")),
            "answer": rec.get("correct_option_key"),
            "answer_text": rec.get("correct_option_text"),
            "explanation": explanations.get(idx),
            "metadata": {"type": rec.get("type")},
        }

    return _map_rows(iter_jsonl(questions), to_row)


def _pubmedqa_row(pmid: str, rec: dict[str, Any]) -> dict[str, Any]:
    decision = rec.get("final_decision")  # an unknown label passes through, so the validator refuses it
    return {
        "id": f"pubmedqa-{pmid}",
        "question": rec.get("QUESTION"),
        "options": dict(YES_NO_MAYBE),
        "answer": _letter(decision, YES_NO_MAYBE),
        # The abstract's conclusion states the answer: it is reference material, not agent input.
        "explanation": rec.get("LONG_ANSWER"),
        "metadata": {key.lower(): rec.get(key) for key in ("CONTEXTS", "LABELS", "MESHES", "YEAR")},
    }


@register_benchmark("pubmedqa")
def load_pubmedqa(
    ctx: LoadContext, path: str = "mirage_rawdata/pubmedqa/data/test_set.json"
) -> Iterator[RawRow]:
    """PubMedQA PQA-L test set as in MIRAGE (500), options {A: yes, B: no, C: maybe}; ids ``pubmedqa-<PMID>``.

    The question alone is ``Question.text``; the abstract paragraphs are in ``metadata["contexts"]``.

    Args:
        ctx: Load context.
        path: The PMID-keyed JSON file, relative to the data root.
    """
    data = _read_json(ctx.file(path))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object keyed by PMID")
    pmids = list(data)
    return _enumerate(data.values(), lambda i, rec: _pubmedqa_row(pmids[i], rec))


def _bioasq_row(task: int, batch: str, q: dict[str, Any]) -> dict[str, Any]:
    answer = q.get("exact_answer")
    if isinstance(answer, list) and len(answer) == 1:
        answer = answer[0]
    ideal = q.get("ideal_answer")
    if isinstance(ideal, list):
        ideal = ideal[0] if ideal else None
    return {
        "id": None if q.get("id") is None else f"bioasq-{q['id']}",
        "question": q.get("body"),
        "options": dict(YES_NO),
        "answer": _letter(answer, YES_NO),  # one 8b answer is "Yes": case is not meaningful
        "explanation": ideal,
        # The articles the experts cited and took the gold snippets from: what an index must leave out to
        # hold the question's own evidence out (medagent.retrieval.holdout). Not shown to the agent.
        "metadata": {"task": f"{task}b", "batch": batch, "documents": _bioasq_documents(q)},
    }


def _bioasq_documents(q: dict[str, Any]) -> list[str]:
    refs = [d for d in q.get("documents") or [] if isinstance(d, str)]
    refs += [
        s["document"]
        for s in q.get("snippets") or []
        if isinstance(s, dict) and isinstance(s.get("document"), str)
    ]
    return sorted(set(refs))


def _batch_number(path: Path) -> int:
    found = re.match(r"\d+B(\d+)_", path.name)  # "10B6_golden.json.gz" -> 6; sorts 10 after 9
    return int(found.group(1)) if found else 0


@register_benchmark("bioasq")
def load_bioasq(ctx: LoadContext, tasks: Iterable[int] = (11, 10, 9, 8, 7)) -> Iterator[RawRow]:
    """BioASQ Task B golden yes/no questions as in MIRAGE (tasks 11, 10, 9, 8, 7); ids ``bioasq-<id>``.

    Options are {A: yes, B: no}; batches are read in order within a task; other question types are not
    part of the benchmark. An id repeated across batches is rejected as a duplicate by the validator.

    Args:
        ctx: Load context.
        tasks: BioASQ task numbers, in reading order.
    """
    assert ctx.data_root is not None  # load_benchmark always resolves one for local loaders
    batches: list[tuple[int, Path]] = []
    for task in tasks:
        folder = ctx.data_root / "mirage_rawdata" / "bioasq" / f"Task{task}BGoldenEnriched"
        found = sorted(folder.glob("*_golden.json.gz"), key=_batch_number)
        if not found:
            raise FileNotFoundError(f"bioasq: no *_golden.json.gz batch files in {folder}")
        batches += [(task, ctx.file(p)) for p in found]

    def rows() -> Iterator[RawRow]:
        row = 0
        for task, path in batches:
            for q in json.loads(gzip.decompress(path.read_bytes())).get("questions", []):
                if isinstance(q, dict) and q.get("type") != "yesno":
                    continue
                row += 1
                batch = path.name.split("_")[0]  # "11B1"
                yield RawRow(row, _bioasq_row(task, batch, q) if isinstance(q, dict) else q)

    return rows()


@register_benchmark("jsonl")
def load_jsonl(ctx: LoadContext, path: str | Path | None = None, name: str | None = None) -> Iterator[RawRow]:
    """Any JSONL file already in the normalized schema.

    Args:
        ctx: Load context.
        path: The file, absolute or relative to the data root (required, else ``ValueError``).
        name: Benchmark name for the rows; defaults to the file stem.
    """
    if path is None:
        raise ValueError("the jsonl benchmark needs path=... (absolute, or relative to the data root)")
    file = ctx.file(path)
    ctx.benchmark = name or file.stem
    return iter_jsonl(file)


def _hub_dataset(repo: str, config: str | None, split: str, revision: str | None) -> Iterable[dict[str, Any]]:
    try:
        from datasets import load_dataset  # optional extra: medagent[hub]
    except ImportError as exc:
        raise ImportError("source_kind='hub' needs the 'datasets' package (install medagent[hub])") from exc
    return load_dataset(repo, config, split=split, revision=revision)


def hub_medqa(ctx: LoadContext, split: str = "test", revision: str | None = None) -> Iterator[RawRow]:
    """MedQA-USMLE 4-option test from ``GBaker/MedQA-USMLE-4-options`` (fields as in the local file)."""
    return _enumerate(_hub_dataset("GBaker/MedQA-USMLE-4-options", None, split, revision), _medqa_row)


def hub_medexpqa(ctx: LoadContext, split: str = "test", revision: str | None = None) -> Iterator[RawRow]:
    """MedExpQA English from ``HiTZ/MedExpQA`` ``en`` (options keyed "1".."5", ``correct_option`` an int).

    Ids are ``medexpqa-<position>``: the local ``idx`` if the hub keeps the origin's order.
    """

    def to_row(index: int, rec: dict[str, Any]) -> dict[str, Any]:
        options = rec.get("options") or {}
        letters = {str(n): string.ascii_uppercase[n - 1] for n in range(1, 27)}
        correct = rec.get("correct_option")
        return {
            "id": f"medexpqa-{index}",
            "question": rec.get("full_question"),
            "options": _drop_none_options({letters.get(str(k), str(k)): v for k, v in options.items()}),
            "answer": letters.get(str(correct), str(correct)),
            "explanation": rec.get("full_answer"),
            "metadata": {"type": rec.get("type")},
        }

    return _enumerate(_hub_dataset("HiTZ/MedExpQA", "en", split, revision), to_row)


def hub_pubmedqa(
    ctx: LoadContext, revision: str | None = None, test_ids: str = "pubmedqa_pqal/test_ground_truth.json"
) -> Iterator[RawRow]:
    """PubMedQA test set from ``qiaojin/PubMedQA`` ``pqa_labeled``.

    The hub config holds all 1,000 labelled items in one ``train`` split; the official 500 test PMIDs
    (and their order, the same as MIRAGE's) come from the local ``test_ground_truth.json``.
    """
    order = [str(k) for k in _read_json(ctx.file(test_ids))]
    by_pmid = {str(r["pubid"]): r for r in _hub_dataset("qiaojin/PubMedQA", "pqa_labeled", "train", revision)}

    def rows() -> Iterator[RawRow]:
        for row, pmid in enumerate(order, 1):
            r = by_pmid.get(pmid)
            if r is None:
                yield RawRow(row, {"id": f"pubmedqa-{pmid}"})  # refused as "missing field: question"
                continue
            abstract = r.get("context") or {}
            names = {"QUESTION": "question", "final_decision": "final_decision", "LONG_ANSWER": "long_answer"}
            rec = {ours: r.get(theirs) for ours, theirs in names.items()}
            rec.update({key.upper(): abstract.get(key) for key in ("contexts", "labels", "meshes")})
            yield RawRow(row, _pubmedqa_row(pmid, rec))

    return rows()


# USMLE (PodGPT's merge of the usmle.org PDFs) and MIRAGE's BioASQ selection have no hub copy of the same
# set, so they have no entry here; load_benchmark(..., source_kind="hub") says so.
HUB_LOADERS: dict[str, Loader] = {"medqa": hub_medqa, "medexpqa": hub_medexpqa, "pubmedqa": hub_pubmedqa}
