"""An asking arm's interviews as text: each turn's question with the policy's reason and the patient's answer,
then what the grounding check kept out of the state and why.

It reads what the run dir holds (``interviews.jsonl``), so it needs no model, no Ray and no server; the
viewer (``python -m pipelines.view``) shows the same turns in a browser.

    python -m medagent.history.evaluation.explain RUN_DIR/arms/amq_information            # every interview
    python -m medagent.history.evaluation.explain RUN_DIR/arms/amq --id RES0001 --refused  # refusals only
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from medagent.history import history_mode
from medagent.history.evaluation.row import InterviewRow
from medagent.history.evaluation.scoring import endpoint_failed
from medagent.run.rundir import RunDir


def _rows(run_dir: str | Path) -> list[InterviewRow]:
    rd = RunDir(Path(run_dir), read_only=True)
    if not rd.interviews.exists():
        raise FileNotFoundError(
            f"{run_dir} holds no interviews.jsonl (an arm's run dir: <run_dir>/arms/<arm>)"
        )
    return [
        InterviewRow.from_dict(d) for d in rd.latest_records(rd.interviews, "interview_id", endpoint_failed)
    ]


def refusals(row: InterviewRow) -> list[dict[str, Any]]:
    """What grounding refused in one interview, in turn order."""
    state = (row.result or {}).get("final_state") or {}
    return sorted(state.get("refused") or [], key=lambda r: r.get("turn", 0))


def explain(row: InterviewRow, *, turns: bool = True) -> Iterator[str]:
    """The lines that describe one interview."""
    result = row.result or {}
    yield f"# {row.interview_id} ({row.arm or row.mode}): {row.outcome()}"
    if turns:
        for t in result.get("turns") or []:
            yield f"turn {t.get('turn')} [{t.get('phase')}, {t.get('slot')}] why: {t.get('reason') or '-'}"
            yield f"  Doctor: {t.get('question', '')}"
            yield f"  Patient: {t.get('answer', '')}"
    if not (row.mode and history_mode(row.mode).asks_questions):
        yield "no state: this arm does not ask (nothing to ground)"
        return
    refused = refusals(row)
    yield f"refused by grounding: {len(refused)}"
    for r in refused:
        quote = f'"{r.get("quote")}"' if r.get("quote") else "no quote"
        yield f"  turn {r.get('turn')}: {r.get('kind')} {r.get('name')} = {r.get('value')!r} on {quote}: {r.get('reason')}"


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m medagent.history.evaluation.explain", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("run_dir", help="an arm's run dir (the one holding interviews.jsonl)")
    p.add_argument("--id", action="append", default=[], help="only this interview (repeatable)")
    p.add_argument("--refused", action="store_true", help="only what grounding refused, no turns")
    args = p.parse_args(argv)
    try:
        rows = _rows(args.run_dir)
    except FileNotFoundError as exc:
        raise SystemExit(str(exc)) from None
    if args.id:
        missing = sorted(set(args.id) - {r.interview_id for r in rows})
        if missing:
            raise SystemExit(f"no such interview in {args.run_dir}: {', '.join(missing)}")
        rows = [r for r in rows if r.interview_id in args.id]
    for row in rows:
        for line in explain(row, turns=not args.refused):
            print(line)
        print()


if __name__ == "__main__":
    main()
