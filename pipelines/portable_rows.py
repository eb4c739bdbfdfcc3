"""Commit a long run's rows without the data set's text, and restore them into a run dir to resume it.

``python -m pipelines.portable_rows export RUN_DIR OUT_DIR`` writes every ``interviews.jsonl`` of an
interview run (a multi-arm run's ``arms/<arm>/`` included) to the same path under ``OUT_DIR``, with every
run of text copied from the interview's transcript replaced by a pointer into it
(``medagent.run.portable``), and copies each arm's ``manifest.json``. ``OUT_DIR`` can then be committed.

``python -m pipelines.portable_rows restore OUT_DIR RUN_DIR`` reads the transcripts again from the data
root, puts the text back, checks every row against the checksum of the row the run wrote, and appends the
rows the run dir lacks. Rerunning the run's own command then resumes after them, and ``report_only=true``
rebuilds its report.

A row that quotes an index (an AMQ arm's guideline evidence, a QA agent's retrieved documents) has the
documents it names among its sources, read from the index its manifest names (or ``--index-dir``): both
commands need that index, and refuse to run without it rather than commit its text.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from medagent.interview.sources import load_interviews
from medagent.run import RunDir
from medagent.run.portable import (
    CHECKSUM,
    DOCS,
    MIN_RUN,
    PortableRowError,
    Redactor,
    RowSources,
    SourcesFor,
    export_run,
    restore_run,
    row_checksum,
)
from medagent.run.rundir import atomic_write

log = logging.getLogger("medagent.portable_rows")
INTERVIEW_FILES = ("interviews.jsonl",)
FACTS = "facts"  # an interview run's case-fact sets, beside its rows
QA_FILES = ("predictions.jsonl", "questions.jsonl", "golds.jsonl", "rejected.jsonl")


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return [obj] if isinstance(obj, str) else []


class IndexDocs:
    """The documents of one index, by id (title and content), read from its stores on demand."""

    def __init__(self, index_dir: Path) -> None:
        from medagent.retrieval.store import TextStore

        stems = sorted((index_dir / "index").glob("*.store.arrow"))
        if not stems:
            raise FileNotFoundError(
                f"{index_dir} holds no index (no index/*.store.arrow): its rows may quote its documents, "
                "so they are neither exported nor restored without it; build it, or pass --index-dir"
            )
        self.stores = [TextStore(stem.with_suffix("")) for stem in stems]
        self._docs: dict[str, list[str] | None] = {}

    def named(self, strings: Sequence[str]) -> list[str]:
        """The ids of documents among ``strings``, sorted (what a row names: citations, evidence, traces)."""
        new = sorted({s for s in strings if len(s) <= 200 and s not in self._docs})
        for s in new:
            self._docs[s] = None
        for store in self.stores if new else []:
            found = store.find(new)
            hits = [i for i in range(len(new)) if found[i] >= 0]
            for i, row in zip(hits, store.read(found[hits]), strict=True):
                self._docs[new[i]] = [row.title, row.content]
        return sorted({s for s in strings if self._docs.get(s) is not None})

    def texts(self, ids: Sequence[str]) -> list[str]:
        """The titles and contents of ``ids``, in order; an id the index lacks is an error."""
        self.named(list(ids))
        missing = [i for i in ids if self._docs.get(i) is None]
        if missing:
            raise PortableRowError(f"the index lacks documents the row quotes: {missing[:3]}")
        return [t for i in ids for t in self._docs[i] or []]


def _index_of(config: dict[str, Any], index_dir: str | None, cache: dict[str, IndexDocs]) -> IndexDocs | None:
    """The index a run's rows may quote: ``index_dir`` when given, else the one its config names."""
    where = index_dir or config.get("index_dir")
    if not where:
        return None
    if where not in cache:
        cache[where] = IndexDocs(Path(where))
    return cache[where]


def _manifest_config(run_dir: Path) -> dict[str, Any]:
    manifest = run_dir / "manifest.json"
    if not manifest.is_file():
        return {}
    return dict(json.loads(manifest.read_text(encoding="utf-8")).get("config") or {})


def _with_docs(texts: list[str], row: dict[str, Any], index: IndexDocs | None, *extra: Any) -> RowSources:
    """``texts``, then the documents the row names (in ``extra`` too, e.g. its trace): on export, found in
    the row; on restore, the ones its ``$docs`` lists."""
    if index is None:
        return RowSources(texts)
    if CHECKSUM in row:  # a portable row: exactly the documents it was exported with
        ids = [str(i) for i in row.get(DOCS, [])]
    else:
        ids = index.named(_strings(row) + [s for e in extra for s in _strings(e)])
    return RowSources(texts + index.texts(ids), tuple(ids))


def transcript_sources(data_root: str | None, index_dir: str | None = None) -> SourcesFor:
    """Interview rows -> (row -> its interview's turn texts, then the index documents it names), loading
    each source's transcripts once."""
    indexes: dict[str, IndexDocs] = {}

    def sources_for(path: Path, rows: list[dict[str, Any]]) -> Callable[[dict[str, Any]], RowSources]:
        by_source: dict[str, set[str]] = {}
        for r in rows:
            by_source.setdefault(str(r["source"]), set()).add(str(r["interview_id"]))
        turns: dict[tuple[str, str], list[str]] = {}
        for source, ids in by_source.items():
            data = load_interviews(source, source, data_root, ids=sorted(ids))
            turns |= {(source, iv.id): [t.text for t in iv.turns] for iv in data.interviews}
        index = _index_of(_manifest_config(path.parent), index_dir, indexes)
        return lambda r: _with_docs(turns[(str(r["source"]), str(r["interview_id"]))], r, index)

    return sources_for


def _interview_config(root: Path) -> dict[str, Any] | None:
    """The config of the first interview run (or arm) under ``root`` that has a manifest."""
    for m in sorted(root.rglob("manifest.json")):
        config = json.loads(m.read_text(encoding="utf-8")).get("config") or {}
        if "interviews" in config:
            return dict(config)
    return None


def _facts_dir(root: Path, facts_dir: str | None) -> tuple[Path, str] | None:
    """Where the run's case facts are cached (``eval.facts_dir``, relative to the working directory) and
    the interviews' source; None when the run keeps none."""
    config = _interview_config(root)
    where = facts_dir or (config or {}).get("eval", {}).get("facts_dir")
    if not where or config is None:
        return None
    return Path(where), str(config["interviews"]["source"])


def export_facts(
    run_dir: Path, out_dir: Path, data_root: str | None, facts_dir: str | None, min_run: int = MIN_RUN
) -> int:
    """Copies the case-fact sets of the run's interviews (``<facts_dir>/<id>.<key>.json``: every arm of an
    interview is scored against the same set) to ``out_dir/facts`` in portable form; returns how many."""
    found = _facts_dir(run_dir, facts_dir)
    if found is None or not found[0].is_dir():
        return 0
    where, source = found
    ids = sorted(
        {
            str(r["interview_id"])
            for f in run_dir.rglob("interviews.jsonl")
            for r in RunDir(f.parent, read_only=True).load_records(f)
        }
    )
    sets = [p for i in ids for p in sorted(where.glob(f"{i}.*.json"))]
    if not sets:
        return 0
    turns = transcript_sources(data_root)(where, [{"source": source, "interview_id": i} for i in ids])
    (out_dir / FACTS).mkdir(parents=True, exist_ok=True)
    for p in sets:
        fs = json.loads(p.read_text(encoding="utf-8"))
        texts = turns({"source": source, "interview_id": fs["interview_id"]}).texts
        portable = Redactor(texts, min_run).redact(fs)
        atomic_write(out_dir / FACTS / p.name, json.dumps(portable, ensure_ascii=False) + "\n")
    return len(sets)


def restore_facts(portable_dir: Path, run_dir: Path, data_root: str | None, facts_dir: str | None) -> int:
    """Writes the portable fact sets the cache lacks (as ``FactCache.put`` writes them); returns how many.
    A set the cache already holds must be the same one, or the run's remaining arms would be scored
    against other facts than its finished ones."""
    files = sorted((portable_dir / FACTS).glob("*.json"))
    found = _facts_dir(portable_dir, facts_dir)
    if not files or found is None:
        return 0
    where, source = found
    sets = [json.loads(p.read_text(encoding="utf-8")) for p in files]
    turns = transcript_sources(data_root)(
        where, [{"source": source, "interview_id": fs["interview_id"]} for fs in sets]
    )
    where.mkdir(parents=True, exist_ok=True)
    n = 0
    for p, portable in zip(files, sets, strict=True):
        target = where / p.name
        if target.exists():
            if row_checksum(json.loads(target.read_text(encoding="utf-8"))) != portable[CHECKSUM]:
                raise PortableRowError(f"{target} differs from its portable copy {p}")
            continue
        texts = turns({"source": source, "interview_id": portable["interview_id"]}).texts
        fs = Redactor(texts).restore(portable)
        # FactCache.put writes a set with indent=1: the restored file is the same bytes.
        atomic_write(target, json.dumps(fs, indent=1))
        n += 1
    return n


def qa_sources(data_root: str | None, index_dir: str | None) -> SourcesFor:
    """QA rows (predictions, questions, golds, rejected rows, traces) -> (row -> its item's texts, then the
    text of every index document the row, or its question's trace, names, by id). The benchmark is loaded
    as the cell's manifest says, once per cell; documents come from ``index_dir`` (default: the one the
    manifest names)."""
    from medagent.data import load_benchmark

    cells: dict[Path, tuple[dict[str, list[str]], IndexDocs | None]] = {}
    indexes: dict[str, IndexDocs] = {}

    def cell(root: Path) -> tuple[dict[str, list[str]], IndexDocs | None]:
        if root not in cells:
            manifest = root / "manifest.json"
            if not manifest.is_file():
                raise FileNotFoundError(f"{manifest} is missing: a QA cell's sources are read from it")
            config = _manifest_config(root)
            bench = config["benchmark"]
            data = load_benchmark(bench["loader"], data_root, **dict(bench.get("options") or {}))
            items = {q.id: _strings(q.to_dict()) + _strings(g.to_dict()) for q, g in data.pairs}
            for rej in data.rejected:
                items.setdefault(f"row:{rej.row}", []).extend([rej.raw, rej.reason])
                if rej.id is not None:
                    items.setdefault(rej.id, []).extend([rej.raw, rej.reason])
            cells[root] = (items, _index_of(config, index_dir, indexes))
        return cells[root]

    def sources_for(path: Path, rows: list[dict[str, Any]]) -> Callable[[dict[str, Any]], RowSources]:
        items, index = cell(path.parent)
        rd = RunDir(path.parent, read_only=True)

        def source_of(r: dict[str, Any]) -> RowSources:
            key = str(r["id"]) if r.get("id") is not None else f"row:{r.get('row')}"
            if key not in items:  # without its item's texts the row would be committed as it is
                raise KeyError(f"{path}: row {key!r} is not an item of the benchmark its manifest names")
            # A prediction's answer may quote a document only its trace names (written before the row).
            trace = rd.trace_path(key)
            named_by_trace = json.loads(trace.read_text(encoding="utf-8")) if trace.is_file() else None
            return _with_docs(list(items[key]), r, index, named_by_trace)

        return source_of

    return sources_for


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m pipelines.portable_rows",
        description="Export a run's rows without the data's text (to commit them), or restore them into a run dir.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="RUN_DIR -> OUT_DIR: rows with pointers into the data's text")
    e.add_argument("run_dir", type=Path)
    e.add_argument("out_dir", type=Path)
    e.add_argument(
        "--min-run", type=int, default=MIN_RUN, help=f"shortest copied run replaced (default {MIN_RUN})"
    )
    r = sub.add_parser("restore", help="OUT_DIR -> RUN_DIR: append the rows the run dir lacks")
    r.add_argument("portable_dir", type=Path)
    r.add_argument("run_dir", type=Path)
    for q in (e, r):
        q.add_argument(
            "--data-root",
            default=None,
            help="the shared data folder (default: $MEDAGENT_DATA, else ../shared/data)",
        )
        q.add_argument(
            "--facts-dir",
            default=None,
            help="interview runs: the case-fact cache (default: the manifest's eval.facts_dir)",
        )
        q.add_argument(
            "--index-dir",
            default=None,
            help="the index whose documents rows quote (default: the one each manifest names)",
        )
    return p.parse_args(argv)


def kind_of(
    root: Path, data_root: str | None, index_dir: str | None
) -> tuple[tuple[str, ...], SourcesFor] | None:
    """The row files under ``root`` and how their sources are read: interview runs (``interviews.jsonl``)
    or QA runs and suites (``predictions.jsonl``); None when it holds neither."""
    if next(root.rglob(INTERVIEW_FILES[0]), None) is not None:
        return INTERVIEW_FILES, transcript_sources(data_root, index_dir)
    if next(root.rglob(QA_FILES[0]), None) is not None:
        return QA_FILES, qa_sources(data_root, index_dir)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args(argv)
    root = args.run_dir if args.command == "export" else args.portable_dir
    kind = kind_of(root, args.data_root, args.index_dir) if root.is_dir() else None
    if kind is None:
        print(f"error: no interviews.jsonl or predictions.jsonl under {root}", file=sys.stderr)
        return 2
    files, sources = kind
    try:
        if args.command == "export":
            done = export_run(args.run_dir, args.out_dir, sources, row_files=files, min_run=args.min_run)
            for f in done:
                log.info("%s: %d rows exported", f.path, f.rows)
            if files == INTERVIEW_FILES:
                n = export_facts(args.run_dir, args.out_dir, args.data_root, args.facts_dir, args.min_run)
                log.info("%d case-fact sets exported", n)
        else:
            done = restore_run(args.portable_dir, args.run_dir, sources, row_files=files)
            for f in done:
                log.info("%s: %d rows, %d restored (the rest were there)", f.path, f.rows, f.written)
            if files == INTERVIEW_FILES:
                n = restore_facts(args.portable_dir, args.run_dir, args.data_root, args.facts_dir)
                log.info("%d case-fact sets restored", n)
    except (PortableRowError, FileNotFoundError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
