"""Which llama.cpp settings suit agent traffic on the CPU tier: many short concurrent conversations, each
resending a growing prefix with short decodes.

Run (the lead's measurement; about an hour on a quiet 2-core machine)::

    python benchmarks/bench_llamacpp_settings.py

Check that it works (< 3 minutes, on SmolLM2-135M; its figures mean nothing):
``python benchmarks/bench_llamacpp_settings.py --quick``

For every setting of the grid (slots x threads x batch/ubatch, and slot affinity on/off for each slot
count) it starts the real engine (``medagent.llm.llamacpp.LlamaCppEngine``, as the CPU LLM deployment
does, with the model of ``conf/llm/<--llm>.yaml``) and replays agent-like traffic: ``--conversations``
concurrent conversations, each the QA agent's real system prompt and one MedQA question, growing over
``--turns`` turns (the model's reply, then an observation: another question's text standing in for a tool
result) with ``--decode`` tokens decoded per turn, temperature 0. Per setting it prints:

- prefix hit rate: cached / sent prompt tokens (llama.cpp ``timings.cache_n``), and on later turns the
  share of the reachable prefix (the previous turn's prompt and reply) that was found; below 1 means
  slots lost conversations' prefixes under concurrency;
- prompt and decode tokens/s per request (the engine's ``prompt_ms`` / ``predicted_ms``), decoded tokens/s
  over the wall clock, and conversations/hour;
- the ratio of conversations/hour to the current default (the first row: ``conf/llm``'s settings).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import yaml  # noqa: E402

from medagent.agent.tools import mode_tools, tool_names, tool_schemas  # noqa: E402
from medagent.config import AgentConfig, LLMConfig, to_dataclass  # noqa: E402
from medagent.data import load_benchmark  # noqa: E402
from medagent.llm.base import Usage, parse_usage  # noqa: E402
from medagent.llm.llamacpp import LlamaCppEngine, LlamaCppSettings, llamacpp_settings  # noqa: E402
from medagent.models import resolve_model  # noqa: E402
from medagent.prompts import load_prompt  # noqa: E402
from medagent.types import Question  # noqa: E402


@dataclass(frozen=True)
class Setting:
    slots: int
    threads: int
    n_batch: int
    n_ubatch: int
    affinity: bool = False

    def label(self) -> str:
        aff = " aff" if self.affinity else ""
        return f"slots={self.slots} thr={self.threads} b={self.n_batch}/{self.n_ubatch}{aff}"


@dataclass
class Totals:
    calls: int = 0
    sent: int = 0
    cached: int = 0
    evaluated: int = 0
    decoded: int = 0
    prompt_ms: float = 0.0
    decode_ms: float = 0.0
    # Later turns: the prefix the conversation's previous call left (its prompt + reply) and what was found.
    reachable: int = 0
    found: int = 0
    wall_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    def add(self, u: Usage) -> None:
        self.calls += 1
        self.sent += u.prompt_tokens
        self.cached += u.cached_tokens or 0
        self.evaluated += u.evaluated_tokens or 0
        self.decoded += u.completion_tokens
        self.prompt_ms += u.prompt_ms or 0.0
        self.decode_ms += u.decode_ms or 0.0


def opening(question: Question) -> list[dict[str, Any]]:
    """The QA agent's first request for ``question`` (its real prompt, as ``QAAgent.answer`` renders it)."""
    cfg = AgentConfig(mode="full")
    names = tool_names(cfg, open_ended=False)
    return load_prompt("qa_agent").render(
        question=question.text,
        options=question.options,
        tools=[{"name": n, "description": tool_schemas([n])[0]["function"]["description"]} for n in names],
        search=True,
        keep=mode_tools(cfg)[1],
        batch_size=cfg.loop.batch_size,
        max_batches=math.ceil(cfg.retrieval.top_r / cfg.loop.batch_size),
        open_ended=False,
    )


def conversation(
    engine: LlamaCppEngine, messages: list[dict[str, Any]], observations: list[str], decode: int, out: Totals
) -> None:
    """One conversation: a call per turn, each resending everything so far plus the reply and the next
    observation (as the agent's loop does)."""
    previous = 0
    for turn, observation in enumerate([*observations, None]):
        body = {"messages": messages, "max_tokens": decode, "temperature": 0.0, "seed": 0}
        try:
            payload = engine.complete_sync(body)
        except Exception as exc:  # noqa: BLE001 - the engine's refusal is a measured outcome, not a crash
            out.errors.append(f"{type(exc).__name__}: {exc}")
            return
        u = parse_usage(payload)
        out.add(u)
        if turn:
            out.reachable += min(previous, u.prompt_tokens)
            out.found += min(u.cached_tokens or 0, previous)
        previous = u.prompt_tokens + u.completion_tokens
        reply = payload["choices"][0]["message"].get("content") or ""
        if observation is None:
            return
        messages = [
            *messages,
            {"role": "assistant", "content": reply},
            {"role": "user", "content": f"Tool result:\n{observation}"},
        ]


def measure(
    model: Path, base: LlamaCppSettings, s: Setting, ctx_per_slot: int, questions: list[Question], args: Any
) -> Totals:
    settings = replace(
        base,
        n_ctx=s.slots * ctx_per_slot,
        n_parallel=s.slots,
        n_threads=s.threads,
        slot_affinity=s.affinity,
        engine_kwargs={**base.engine_kwargs, "n_batch": s.n_batch, "n_ubatch": s.n_ubatch},
    )
    engine = LlamaCppEngine(model, settings)
    out = Totals()
    n = args.conversations
    try:
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=n) as pool:
            for i in range(n):
                q = questions[i % len(questions)]
                # Observations: other questions' texts, as long as a reviewed document's excerpt.
                obs = [
                    questions[(i + k + 1) % len(questions)].text[: args.obs_chars]
                    for k in range(args.turns - 1)
                ]
                pool.submit(conversation, engine, opening(q), obs, args.decode, out)
        out.wall_s = time.perf_counter() - start
    finally:
        del engine
        gc.collect()
    return out


def grid(args: Any, default: Setting) -> list[Setting]:
    if args.quick:
        return [default, replace(default, affinity=True)]
    settings = [default]
    for slots, threads, (b, ub) in itertools.product(args.slots, args.threads, args.batches):
        settings.append(Setting(slots, threads, b, ub))
    settings += [
        Setting(slots, default.threads, default.n_batch, default.n_ubatch, True) for slots in args.slots
    ]
    return list(dict.fromkeys(settings))


def _rate(tokens: float, ms: float) -> str:
    return f"{1000 * tokens / ms:8.1f}" if ms else f"{'—':>8}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--llm", default=None,
        help="conf/llm/<name>.yaml, a llamacpp config (default qwen2.5-coder-1.5b-cpu; --quick: smollm2-135m-cpu)",
    )  # fmt: skip
    p.add_argument("--conversations", type=int, default=8, help="concurrent conversations per setting")
    p.add_argument("--turns", type=int, default=4, help="model calls per conversation")
    p.add_argument("--decode", type=int, default=64, help="max tokens decoded per call (agent turns: 60-110)")
    p.add_argument("--obs-chars", type=int, default=600, help="characters of each turn's observation")
    p.add_argument("--ctx-per-slot", type=int, default=8192, help="context per conversation (the QA paper's)")
    p.add_argument("--slots", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument(
        "--batches", type=lambda s: tuple(int(x) for x in s.split("/")), nargs="+",
        default=[(2048, 512), (512, 512), (512, 128)], help="n_batch/n_ubatch pairs",
    )  # fmt: skip
    p.add_argument(
        "--quick", action="store_true", help="2 conversations x 2 turns, default slots with/without affinity"
    )
    args = p.parse_args()
    if args.quick:  # a check that the harness runs, on the small model: no figure to read
        args.conversations, args.turns, args.decode, args.obs_chars = 2, 2, 16, 300
    args.llm = args.llm or ("smollm2-135m-cpu" if args.quick else "qwen2.5-coder-1.5b-cpu")
    llm = to_dataclass(LLMConfig, yaml.safe_load((REPO / "conf" / "llm" / f"{args.llm}.yaml").read_text()))
    base = llamacpp_settings(llm)
    # The current default: conf/llm's slots, threads and llama.cpp's own batch sizes (2048 / 512).
    default = Setting(
        llm.n_parallel, llm.n_threads, int(base.engine_kwargs.get("n_batch", 2048)),
        int(base.engine_kwargs.get("n_ubatch", 512)), llm.slot_affinity,
    )  # fmt: skip
    ctx_per_slot = args.ctx_per_slot
    model = resolve_model(llm.model.spec())
    questions = [q for q, _ in load_benchmark("medqa", limit=max(args.conversations + args.turns, 8)).pairs]
    print(
        f"{args.llm}: {args.conversations} concurrent conversations x {args.turns} turns, {args.decode} tokens "
        f"decoded per turn, {ctx_per_slot} tokens of context per slot; cores: {os.cpu_count()}"
    )
    head = (
        f"{'setting':<32} {'calls':>5} {'sent':>7} {'hit %':>6} {'later found %':>13} {'prompt t/s':>10} "
        f"{'decode t/s':>10} {'dec t/s wall':>12} {'wall s':>7} {'conv/h':>7} {'× default':>9}"
    )
    print(head)
    base_rate = None
    for s in grid(args, default):
        t = measure(model, base, s, ctx_per_slot, questions, args)
        rate = 3600 * args.conversations / t.wall_s if t.wall_s and not t.errors else 0.0
        base_rate = base_rate if base_rate is not None else rate
        hit = 100 * t.cached / t.sent if t.sent else 0.0
        later = f"{100 * t.found / t.reachable:13.0f}" if t.reachable else f"{'—':>13}"
        print(
            f"{s.label():<32} {t.calls:>5} {t.sent:>7} {hit:>6.0f} {later} {_rate(t.evaluated, t.prompt_ms):>10} "
            f"{_rate(t.decoded, t.decode_ms):>10} {t.decoded / t.wall_s if t.wall_s else 0:>12.1f} "
            f"{t.wall_s:>7.1f} {rate:>7.1f} {rate / base_rate if base_rate else 0:>9.2f}",
            flush=True,
        )
        for e in t.errors[:3]:
            print(f"  error: {e}")


if __name__ == "__main__":
    main()
