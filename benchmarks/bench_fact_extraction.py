"""Case-fact extraction with its excerpts asked one at a time vs ``--concurrency`` at once, on the real CPU model.

One process, one llama.cpp engine (``--llm``, the interview runs' default), the same interviews for both
settings, no fact cache. The order alternates per interview (ABBA: baseline first on even interviews, second
on odd ones) so that neither setting always finds the other's prompts in the server's prefix cache; the
evaluated (not cached) prompt tokens are printed so that effect can be seen. Prints, per interview and in
total: wall seconds per setting, facts kept, prompt tokens evaluated and decoded, and the ratio
``baseline wall / concurrent wall`` (above 1: concurrency is faster).

    python benchmarks/bench_fact_extraction.py --limit 2                       # 2 eval interviews
    python benchmarks/bench_fact_extraction.py --ids RES0038,RES0042 --concurrency 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.validate_patients import _llm  # noqa: E402
from medagent.history.agent.information import DEFAULT_EVAL_FRACTION, DEFAULT_SALT, split_ids  # noqa: E402
from medagent.history.evaluation.replay_validation import seen_turns  # noqa: E402
from medagent.history.facts.extract import extract_facts  # noqa: E402
from medagent.interview.transcripts import load_transcripts  # noqa: E402
from medagent.llm.usage import UsageRecord  # noqa: E402


async def _one(llm: Any, model: str, iv_id: str, turns: Any, cfg: Any, concurrency: int) -> dict[str, Any]:
    usage = UsageRecord.calls()
    t0 = time.perf_counter()
    fs = await extract_facts(
        llm, iv_id, turns, model=model, chunk_chars=cfg.eval.facts_chunk_chars,
        max_tokens=cfg.eval.facts_max_tokens, json_schema=cfg.llm.supports_json_schema, usage=usage,
        concurrency=concurrency,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    d = usage.to_dict()
    return {
        "wall_s": round(wall, 1),
        "facts": len(fs.facts),
        "errors": len(fs.errors),
        "calls": d.get("llm_calls"),
        "evaluated": d.get("evaluated_tokens"),
        "decoded": d.get("completion_tokens"),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    llm, cfg = _llm(args.llm)
    if args.ids:
        ids = args.ids.split(",")
    else:
        all_ids = [p.stem for p in load_transcripts("RES", args.data_root)[1]]
        ids = split_ids(all_ids, DEFAULT_EVAL_FRACTION, DEFAULT_SALT)[1][args.skip : args.skip + args.limit]
    interviews, _ = load_transcripts("RES", args.data_root, ids=ids)
    settings = [("one at a time", 1), (f"{args.concurrency} at once", args.concurrency)]
    rows: list[dict[str, Any]] = []
    for k, iv in enumerate(interviews):
        turns = seen_turns(iv)
        order = settings if k % 2 == 0 else settings[::-1]
        got = {name: await _one(llm, llm.model, iv.id, turns, cfg, c) for name, c in order}
        rows.append({"id": iv.id, **got})
        base, conc = got[settings[0][0]], got[settings[1][0]]
        print(
            f"{iv.id}: {base['wall_s']} s vs {conc['wall_s']} s ({base['wall_s'] / conc['wall_s']:.2f}x); facts "
            f"{base['facts']} / {conc['facts']}; evaluated {base['evaluated']} / {conc['evaluated']}; decoded "
            f"{base['decoded']} / {conc['decoded']}",
            flush=True,
        )
    total = {name: sum(r[name]["wall_s"] for r in rows) for name, _ in settings}
    ratio = total[settings[0][0]] / total[settings[1][0]]
    print(f"total over {len(rows)} interviews: {total}; baseline / concurrent = {ratio:.2f}x")
    return {"rows": rows, "total_s": total, "ratio": ratio}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--llm", default="qwen2.5-coder-1.5b-cpu")
    p.add_argument("--data-root", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--ids", default="", help="comma-separated RES ids (default: the eval split's)")
    p.add_argument("--limit", type=int, default=2)
    p.add_argument(
        "--skip", type=int, default=24, help="eval ids to skip (the experiment's first 24 are cached)"
    )
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    return p.parse_args(argv)


if __name__ == "__main__":
    a = parse()
    result = asyncio.run(main(a))
    if a.out:
        a.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
