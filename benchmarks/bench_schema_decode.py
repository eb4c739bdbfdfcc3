"""What a JSON schema costs llama.cpp's decoding: one stream, free text vs the history agent's per-turn update
schema without its length bounds vs the schema as the agent sends it (``maxLength`` / ``maxItems``).

One process, one engine with one slot (``--llm``'s model and threads), the same prompt (a patient's opening
answer to record as a state change) and ``--tokens`` decoded per call, temperature 0; the three forms run in
turn, ``--reps`` times. Prints each call's decode rate (llama.cpp's ``predicted_per_second``) and each form's
median rate as a ratio to free text in the same process. The answer is only about speed: a schema changes
what is decoded, and the agent's outputs are compared elsewhere (``bench_agent_cost.py``).

    python benchmarks/bench_schema_decode.py                 # ~3 minutes on 2 cores, Qwen2.5-Coder-1.5B
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from medagent.config import HistoryAgentConfig, LLMConfig, to_dataclass  # noqa: E402
from medagent.history.agent.preprocess import update_schema  # noqa: E402
from medagent.llm.llamacpp import LlamaCppEngine, LlamaCppSettings  # noqa: E402
from medagent.models import resolve_model  # noqa: E402

MESSAGES = [
    {
        "role": "system",
        "content": "You are a physician taking a clinical history. After each answer record what the answer "
        "changes as JSON with keys summary_add, slot_updates (slot, value, quote), differential (diagnosis, "
        "probability, reason), red_flags and route.",
    },
    {
        "role": "user",
        "content": "Doctor: What brings you in today?\nPatient: I've had this sharp pain in my chest for just "
        "over a week now, it's worse when I take a deep breath, and I've been short of breath. I had a cough "
        "about a week ago and thought it might be a chest infection. No fever.",
    },
]


def unbounded(node: Any) -> Any:
    """The schema without its length bounds (``maxLength``, ``maxItems``)."""
    if isinstance(node, dict):
        return {k: unbounded(v) for k, v in node.items() if k not in ("maxLength", "maxItems")}
    if isinstance(node, list):
        return [unbounded(v) for v in node]
    return node


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llm", default="qwen2.5-coder-1.5b-cpu", help="conf/llm/<name>.yaml (a llamacpp config)")
    p.add_argument("--tokens", type=int, default=160, help="tokens decoded per call")
    p.add_argument("--reps", type=int, default=2)
    args = p.parse_args()

    engine = one_slot(args.llm)
    capped = update_schema(HistoryAgentConfig())
    plain = copy.deepcopy(capped)
    plain["json_schema"]["schema"] = unbounded(capped["json_schema"]["schema"])
    forms: dict[str, dict[str, Any] | None] = {"free text": None, "schema": plain, "schema, bounded": capped}
    rates: dict[str, list[float]] = {name: [] for name in forms}
    print(f"{args.llm}: one slot, {args.tokens} tokens per call, temperature 0")
    for rep in range(args.reps):
        for name, fmt in forms.items():
            body: dict[str, Any] = {"messages": MESSAGES, "max_tokens": args.tokens, "temperature": 0.0}
            if fmt is not None:
                body["response_format"] = fmt
            start = time.perf_counter()
            reply = engine.complete_sync(body)
            wall = time.perf_counter() - start
            rate = float(reply.get("timings", {}).get("predicted_per_second") or 0.0)
            rates[name].append(rate)
            print(f"rep {rep} {name:<16} decoded {reply['usage']['completion_tokens']:>4}  {rate:6.2f} tok/s  "
                  f"wall {wall:5.1f} s", flush=True)  # fmt: skip
    base = statistics.median(rates["free text"])
    print(f"\n{'form':<16} {'median tok/s':>12} {'× free text':>11}")
    for name, values in rates.items():
        m = statistics.median(values)
        print(f"{name:<16} {m:>12.2f} {m / base if base else 0:>11.2f}")


def one_slot(name: str) -> LlamaCppEngine:
    """The ``--llm`` engine with one slot (its per-slot context) and its configured threads."""
    llm = to_dataclass(LLMConfig, yaml.safe_load((REPO / "conf" / "llm" / f"{name}.yaml").read_text()))
    per_slot = llm.n_ctx // max(llm.n_parallel, 1)
    return LlamaCppEngine(
        resolve_model(llm.model.spec()),
        LlamaCppSettings(n_ctx=per_slot, n_parallel=1, n_threads=llm.n_threads),
    )


if __name__ == "__main__":
    main()
