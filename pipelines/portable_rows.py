"""Commit a long run's rows without the data set's text, and restore them into a run dir to resume it.

``python -m pipelines.portable_rows export RUN_DIR OUT_DIR`` writes every ``interviews.jsonl`` of an
interview run (a multi-arm run's ``arms/<arm>/`` included) to the same path under ``OUT_DIR``, with every
run of text copied from the interview's transcript replaced by a pointer into it
(``medagent.run.portable``), and copies each arm's ``manifest.json``. ``OUT_DIR`` can then be committed.

``python -m pipelines.portable_rows restore OUT_DIR RUN_DIR`` reads the transcripts again from the data
root, puts the text back, checks every row against the checksum of the row the run wrote, and appends the
rows the run dir lacks. Rerunning the run's own command then resumes after them, and ``report_only=true``
rebuilds its report. Traces are not exported.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from medagent.interview.sources import load_interviews
from medagent.run.portable import MIN_RUN, PortableRowError, export_run, restore_run

log = logging.getLogger("medagent.portable_rows")
ROW_FILES = ("interviews.jsonl",)


def transcript_sources(
    data_root: str | None,
) -> Callable[[list[dict[str, Any]]], Callable[[dict[str, Any]], Sequence[str]]]:
    """Rows -> (row -> its interview's turn texts), loading each source's transcripts once."""

    def sources_for(rows: list[dict[str, Any]]) -> Callable[[dict[str, Any]], Sequence[str]]:
        by_source: dict[str, set[str]] = {}
        for r in rows:
            by_source.setdefault(str(r["source"]), set()).add(str(r["interview_id"]))
        turns: dict[tuple[str, str], list[str]] = {}
        for source, ids in by_source.items():
            data = load_interviews(source, source, data_root, ids=sorted(ids))
            turns |= {(source, iv.id): [t.text for t in iv.turns] for iv in data.interviews}
        return lambda r: turns[(str(r["source"]), str(r["interview_id"]))]

    return sources_for


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m pipelines.portable_rows",
        description="Export an interview run's rows without transcript text (to commit), or restore them.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="RUN_DIR -> OUT_DIR: rows with pointers into the transcripts")
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
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args(argv)
    sources = transcript_sources(args.data_root)
    try:
        if args.command == "export":
            done = export_run(args.run_dir, args.out_dir, sources, row_files=ROW_FILES, min_run=args.min_run)
            for f in done:
                log.info("%s: %d rows exported", f.path, f.rows)
        else:
            done = restore_run(args.portable_dir, args.run_dir, sources, row_files=ROW_FILES)
            for f in done:
                log.info("%s: %d rows, %d restored (the rest were there)", f.path, f.rows, f.written)
    except (PortableRowError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
