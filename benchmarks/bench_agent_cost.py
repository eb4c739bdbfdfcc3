"""Experiments per hour: the full QA agent and the history-taking agent under the old and the new settings,
in one run, on the same questions and interviews, deterministic decoding.

Run (the lead's measurement, a quiet 2-core machine)::

    python benchmarks/bench_agent_cost.py --questions 10 --interviews 2
    # paired quality checks where outputs change: accuracy on 40 MedQA questions, fact recall on 10 interviews
    python benchmarks/bench_agent_cost.py --questions 40 --interviews 10

Smoke check (a few minutes): ``python benchmarks/bench_agent_cost.py --limit 1 --interviews 0``

Each arm loads its own llama.cpp engine in this process (the CPU LLM deployment's engine, with that arm's
settings) and runs the real agents over it: the full QA agent (``agent=full``) with an in-process retriever
and reranker over ``--index-dir`` (the retrieval deployments' own classes), questions ``--in-flight`` at a
time (default: the arm's slots); the history-taking agent (``run_interviews``' config, ``--interviews``
interviews of ``--turns`` turns) with its patient simulator, as ``pipelines.run_interviews`` runs them.

- old: the settings before the cost work: ``agent.cap_outputs=false`` (unbounded tool replies) and
  llama.cpp's previous defaults (``--old-llm``: 2 slots, no slot affinity, llama.cpp's batch sizes);
- new: the package defaults (``conf/llm/<--llm>.yaml``, bounded replies) plus ``--new-llm``.

The history agent's change-only update replaced the whole-state one and has no switch, so both arms use it:
the history comparison sees the llama.cpp settings only (``benchmarks/bench_update_tokens.py`` counts what
the update change saves). Interviews come from the eval split (``osce_res_eval``), whose case facts the
seed B experiment caches.

``--old`` / ``--new`` (QA) and ``--old-history`` / ``--new-history`` add Hydra overrides to an arm (e.g. the
history agent's change-only update switch). Temperature 0 and a fixed engine seed throughout. Printed:
questions/hour and interviews/hour (over the answering wall time, model loading excluded), tokens sent /
evaluated / decoded per question (interview) by kind of call, accuracy and fact recall per arm with the
paired new - old difference and its 95% bootstrap CI, and the new/old ratios. Arms run one after the other
(old first): on a shared machine, rerun with ``--order new,old`` to see the drift.

``--run-dir DIR`` makes a long check resumable: each finished question or interview is appended to
``DIR/<qa|history>-<arm>.jsonl`` with the time its stretch of work had run, and a rerun with the same
settings skips what is there. An arm's rate is its items over the sum of its stretches, each counted up to its
last finished item (model loading excluded). A rerun with other settings is refused.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from omegaconf import OmegaConf  # noqa: E402

from medagent.agent import build_agent  # noqa: E402
from medagent.agent.services import AgentDeps  # noqa: E402
from medagent.data import load_benchmark  # noqa: E402
from medagent.eval import bootstrap_ci, question_outcomes  # noqa: E402
from medagent.llm.llamacpp import LlamaCppEngine, llamacpp_settings  # noqa: E402
from medagent.llm.usage import UsageRecord  # noqa: E402
from medagent.models import resolve_model  # noqa: E402
from medagent.report.usage import COST_BY_CALL_COLUMNS, call_kind_rows, cost_by_call_cells  # noqa: E402
from medagent.types import Prediction  # noqa: E402
from pipelines.submit import compose_pipeline_config  # noqa: E402

# llama.cpp's settings before this change (conf/llm/qwen2.5-coder-1.5b-cpu.yaml then): 2 slots of 8,192
# tokens, no affinity, the engine's own batch sizes.
OLD_LLM = ["llm.n_ctx=16384", "llm.n_parallel=2", "llm.n_threads=2", "llm.slot_affinity=false"]
OLD_QA = ["agent.cap_outputs=false"]
DETERMINISTIC = ["agent.sampling.temperature=0.0"]
# The interview record's figures compared old vs new (``InterviewRecord``): the fact-level endpoints first.
HISTORY_METRICS = ("elicited_fact_recall", "summary_fact_recall", "summary_fact_precision", "patient_answered",
                   "red_flag_recall", "rouge_l", "bertscore_f1")  # fmt: skip
# The eval split, whose case facts the seed B experiment caches (outputs/facts): both arms read the same ones.
HISTORY_DATA = ["interviews=osce_res_eval"]


@dataclass
class ArmResult:
    name: str
    wall_s: float = 0.0
    n: int = 0
    usages: list[UsageRecord] = field(default_factory=list)
    # Quality per question / interview, by metric: accuracy (1/0) for QA, the interview record's figures
    # (HISTORY_METRICS) for the history agent.
    outcomes: dict[str, dict[str, float]] = field(default_factory=dict)
    errors: int = 0


class Ledger:
    """The finished items of one arm, appended as they finish, with the stretch (process run) each came from
    and how long that stretch had run when it finished. Work in flight when a stretch ends is redone."""

    clock = staticmethod(time.perf_counter)

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.rows: dict[str, dict[str, Any]] = {}
        self.stretches: dict[str, float] = {}
        if path is not None and path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    entry = json.loads(line)
                    self.rows.setdefault(entry["id"], entry["row"])
                    self.stretches[entry["stretch"]] = max(self.stretches.get(entry["stretch"], 0.0),
                                                           entry["elapsed_s"])  # fmt: skip
        self.stretch = f"{time.time():.6f}-{os.getpid()}"
        self.start = self.clock()

    def add(self, item_id: str, row: dict[str, Any]) -> None:
        self.rows[item_id] = row
        elapsed = self.clock() - self.start
        self.stretches[self.stretch] = elapsed
        if self.path is not None:
            line = {"id": item_id, "stretch": self.stretch, "elapsed_s": elapsed, "row": row}
            with self.path.open("a") as f:
                f.write(json.dumps(line) + "\n")

    def todo(self, ids: list[str], unit: str) -> set[str]:
        """The ids of ``ids`` not finished yet, saying how many were."""
        done = sum(i in self.rows for i in ids)
        if done:
            print(f"  resuming: {done} of {len(ids)} {unit} already finished")
        return {i for i in ids if i not in self.rows}

    @property
    def wall_s(self) -> float:
        return sum(self.stretches.values())


def _ledger(run_dir: Path | None, what: str, arm: str, settings: dict[str, Any]) -> Ledger:
    """This arm's ledger in ``run_dir`` (none without one), refusing a run dir made with other settings."""
    if run_dir is None:
        return Ledger(None)
    run_dir.mkdir(parents=True, exist_ok=True)
    kept = run_dir / f"{what}-{arm}.settings.json"
    if kept.exists() and json.loads(kept.read_text()) != settings:
        raise SystemExit(f"{run_dir}: its {what} {arm} arm ran with {kept.read_text()}, not {json.dumps(settings)}: "
                         "use another --run-dir")  # fmt: skip
    kept.write_text(json.dumps(settings))
    return Ledger(run_dir / f"{what}-{arm}.jsonl")


def _compose(name: str, overrides: list[str]) -> Any:
    return OmegaConf.to_object(compose_pipeline_config(name, overrides))


def _engine(llm: Any) -> LlamaCppEngine:
    return LlamaCppEngine(resolve_model(llm.model.spec()), llamacpp_settings(llm), name=llm.served_name)


class _LocalRetriever:
    """The retriever deployment's search (``actors.retrieval_servers.RetrieverServer``) without Serve: one
    request, one search, in a thread; the agent reaches it through the same client as the deployment."""

    def __init__(self, index_dir: str, cfg: Any) -> None:
        from medagent.retrieval.search import Searcher

        self.cfg = cfg
        self.searcher = Searcher(index_dir, use_gpu=False)

    async def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        from medagent.api import RetrieveRequest, RetrieveResponse

        r = RetrieveRequest.model_validate(body)
        mode = r.mode or self.cfg.mode
        parents = self.cfg.return_parents if r.return_parents is None else r.return_parents
        sources = list(r.sources) if r.sources else None

        def search() -> dict[str, Any]:
            ranked = self.searcher.search({"0": r.query}, r.top_k, sources, mode, parents)["0"]
            docs = self.searcher.documents(list(ranked), ranked)
            return RetrieveResponse(query_id=r.query_id, results=ranked, documents=docs).model_dump()

        return await asyncio.to_thread(search)


class _LocalReranker:
    """The reranker deployment's scoring (``actors.retrieval_servers.RerankerServer``) without Serve."""

    def __init__(self, cfg: Any) -> None:
        from medagent.retrieval.rerank import EmbeddingReranker

        self.cfg = cfg
        self.reranker = EmbeddingReranker(cfg)

    async def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        from medagent.api import RerankRequest, RerankResponse

        r = RerankRequest.model_validate(body)
        top_r = r.top_r or self.cfg.top_r
        scored = await asyncio.to_thread(self.reranker.rerank_many, [(r.query, r.candidates)], top_r)
        return RerankResponse(results=scored[0]).model_dump()


def _services(cfg: Any) -> dict[str, Any]:
    """The retriever and reranker of ``cfg``, in this process, behind the clients the workers use."""
    from medagent.agent.remote_services import RemoteReranker, RemoteRetriever

    return {
        "retriever": RemoteRetriever(_LocalRetriever(cfg.index_dir, cfg.retriever)),
        "reranker": RemoteReranker(_LocalReranker(cfg.reranker)),
    }


async def _qa(
    cfg: Any, engine: LlamaCppEngine, services: dict[str, Any], n: int, in_flight: int, ledger: Ledger
) -> ArmResult:
    data = load_benchmark(cfg.benchmark.name, data_root=cfg.data_root, limit=n)
    golds = {g.id: g for _, g in data.pairs}
    deps = AgentDeps(**services, json_schema=cfg.llm.supports_json_schema, tool_calls=cfg.llm.tool_calls,
                     tool_choice=cfg.llm.tool_choice, logprobs=cfg.llm.supports_logprobs)  # fmt: skip
    agent = build_agent(cfg.agent, engine, deps)
    gate = asyncio.Semaphore(in_flight)

    async def one(q: Any) -> None:
        async with gate:
            pred = await agent.answer(q)
        ledger.add(q.id, pred.to_dict())
        u = UsageRecord.from_dict(pred.usage)
        print(f"  {q.id}: {pred.latency_s:.0f} s, {u.llm_calls} calls, {u.prompt_tokens} sent, "
              f"{u.evaluated_tokens} evaluated, {u.completion_tokens} decoded", flush=True)  # fmt: skip

    todo = ledger.todo([q.id for q, _ in data.pairs], "questions")
    await asyncio.gather(*(one(q) for q, _ in data.pairs if q.id in todo))
    preds = [Prediction.from_dict(ledger.rows[q.id]) for q, _ in data.pairs]
    out = ArmResult("", wall_s=ledger.wall_s, n=len(preds))
    out.usages = [UsageRecord.from_dict(p.usage) for p in preds]
    out.outcomes = {"accuracy": {k: float(v) for k, v in question_outcomes(preds, golds).items()}}
    out.errors = sum(p.error is not None for p in preds)
    return out


async def _history(cfg: Any, engine: LlamaCppEngine, n: int, ledger: Ledger) -> ArmResult:
    from actors.common import text_embedder
    from medagent.history import build_history_agent
    from medagent.history.agent.modes import needs_history_retrieval
    from medagent.history.evaluation.runner import evaluate_interview
    from medagent.interview.sources import load_interviews
    from medagent.llm.base import LLMError

    data = load_interviews(cfg.interviews.name, cfg.interviews.source, cfg.data_root,
                           prefix=cfg.interviews.prefix, ids=list(cfg.interviews.ids), limit=n)  # fmt: skip
    embedder = text_embedder(asdict(cfg.embedder) if cfg.embedder else None)
    retriever = None
    if needs_history_retrieval(cfg.agent):
        from medagent.agent.remote_services import RemoteRetriever

        if not Path(cfg.index_dir).exists():
            raise SystemExit(
                f"{cfg.index_dir}: no guideline index (`make guidelines-index`, or --guidelines-dir)"
            )
        retriever = RemoteRetriever(_LocalRetriever(cfg.index_dir, cfg.retriever))
    cfg.agent.generation.json_schema = cfg.agent.generation.json_schema and cfg.llm.supports_json_schema
    agent = build_history_agent(cfg.agent, engine, retriever, embedder)
    gate = asyncio.Semaphore(cfg.agent.max_concurrency)

    async def one(iv: Any) -> None:
        async with gate:
            try:
                row = await evaluate_interview(iv, agent, engine, cfg.eval, embedder=embedder)
            except LLMError as exc:
                print(f"  {iv.id}: {exc}", flush=True)
                return
            print(f"  {iv.id}: {row.outcome()}", flush=True)
            ledger.add(iv.id, row.to_dict())

    todo = ledger.todo([iv.id for iv in data.interviews], "interviews")
    await asyncio.gather(*(one(iv) for iv in data.interviews if iv.id in todo))
    # An interview whose model calls failed is not in the ledger (a rerun tries it again): an error here.
    rows = [ledger.rows.get(iv.id) for iv in data.interviews]
    out = ArmResult("", wall_s=ledger.wall_s, n=len(rows))
    for iv, row in zip(data.interviews, rows, strict=True):
        if row is None or row.get("skipped") or row.get("error"):
            out.errors += 1
            continue
        out.usages.append(UsageRecord.from_dict((row.get("result") or {}).get("usage")))
        record = row.get("record") or {}
        for metric in HISTORY_METRICS:
            value = record.get(metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.outcomes.setdefault(metric, {})[iv.id] = float(value)
    return out


def _print_arm(what: str, arm: ArmResult, unit: str) -> None:
    per_hour = 3600 * arm.n / arm.wall_s if arm.wall_s else 0.0
    print(f"\n{what} [{arm.name}]: {arm.n} {unit}s in {arm.wall_s:.0f} s = {per_hour:.1f} {unit}s/hour, "
          f"{arm.errors} errors/skipped")  # fmt: skip
    print(f"  {'call':<28} " + " ".join(f"{c:>11}" for c in COST_BY_CALL_COLUMNS))
    for row in call_kind_rows(arm.usages):
        print(f"  {row['kind'][:28]:<28} " + " ".join(f"{c:>11}" for c in cost_by_call_cells(row)))


def _compare(what: str, unit: str, old: ArmResult, new: ArmResult) -> None:
    rate = {a.name: 3600 * a.n / a.wall_s if a.wall_s else 0.0 for a in (old, new)}
    tot = {a.name: next(r for r in call_kind_rows(a.usages) if r["kind"] == "all") for a in (old, new)}

    def ratio(key: str) -> str:
        o, n = tot["old"][key], tot["new"][key]
        return f"{n / o:.2f}" if o and n is not None else "—"

    print(f"\n{what}: new/old  {unit}s/hour {rate['new'] / rate['old'] if rate['old'] else float('nan'):.2f}  "
          f"sent {ratio('sent')}  evaluated {ratio('evaluated')}  decoded {ratio('decoded')}  "
          f"LLM s {ratio('llm_s')}")  # fmt: skip
    for metric, olds in old.outcomes.items():
        news = new.outcomes.get(metric, {})
        common = sorted(set(olds) & set(news))
        if not common:
            continue
        diffs = [news[k] - olds[k] for k in common]
        lo, hi = bootstrap_ci(diffs)
        print(f"  {metric}: old {sum(olds[k] for k in common) / len(common):.3f}  "
              f"new {sum(news[k] for k in common) / len(common):.3f}  paired new-old {sum(diffs) / len(diffs):+.3f} "
              f"[95% CI {lo:+.3f}, {hi:+.3f}] (n={len(common)})")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llm", default="qwen2.5-coder-1.5b-cpu")
    p.add_argument("--questions", "--limit", dest="questions", type=int, default=10, help="MedQA questions")
    p.add_argument("--interviews", type=int, default=2, help="history-taking interviews (0: none)")
    p.add_argument("--turns", type=int, default=16, help="agent turns per interview (the history paper's 16)")
    p.add_argument("--index-dir", default=None, help="the QA agent's index (default: the demo's)")
    p.add_argument("--guidelines-dir", default=None, help="the history agent's index (default: its config's)")
    p.add_argument(
        "--in-flight", type=int, default=None, help="questions in flight (default: the arm's slots)"
    )
    p.add_argument("--old-llm", nargs="*", default=OLD_LLM)
    p.add_argument("--new-llm", nargs="*", default=[])
    p.add_argument("--old", nargs="*", default=OLD_QA, help="QA overrides of the old arm")
    p.add_argument("--new", nargs="*", default=[], help="QA overrides of the new arm")
    p.add_argument("--old-history", nargs="*", default=[], help="history overrides of the old arm")
    p.add_argument("--new-history", nargs="*", default=[], help="history overrides of the new arm")
    p.add_argument("--order", default="old,new")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="append each finished item here and skip those already there on a rerun (resumable)")  # fmt: skip
    args = p.parse_args()
    index = args.index_dir or next(
        (
            str(REPO / d)
            for d in ("outputs/index/cpu_default", "outputs/index/demo-500")
            if (REPO / d).exists()
        ),
        None,
    )
    if args.questions and (index is None or not Path(index).exists()):
        raise SystemExit("no index: pass --index-dir, or build the demo's with `make demo-index`")
    arms = {
        "old": (args.old_llm, args.old, args.old_history),
        "new": (args.new_llm, args.new, args.new_history),
    }
    qa: dict[str, ArmResult] = {}
    hist: dict[str, ArmResult] = {}
    for name in args.order.split(","):
        llm_over, qa_over, hist_over = arms[name]
        llm = [f"llm={args.llm}", *llm_over]
        qa_cfg = _compose("run_benchmark", ["benchmark=medqa", "agent=full", f"index_dir={index}", *llm,
                                            *DETERMINISTIC, *qa_over])  # fmt: skip
        load = time.perf_counter()
        engine = _engine(qa_cfg.llm)
        print(f"[{name}] engine loaded in {time.perf_counter() - load:.0f} s: n_parallel={qa_cfg.llm.n_parallel}, "
              f"n_ctx={qa_cfg.llm.n_ctx}, affinity={qa_cfg.llm.slot_affinity}, engine_kwargs={qa_cfg.llm.engine_kwargs}, "
              f"cap_outputs={qa_cfg.agent.cap_outputs}", flush=True)  # fmt: skip
        try:
            if args.questions:
                in_flight = args.in_flight or qa_cfg.llm.n_parallel
                settings = {"llm": llm, "qa": qa_over, "in_flight": in_flight, "index": index}
                ledger = _ledger(args.run_dir, "qa", name, settings)
                qa[name] = asyncio.run(
                    _qa(qa_cfg, engine, _services(qa_cfg), args.questions, in_flight, ledger)
                )
                qa[name].name = name
                _print_arm("QA agent (full)", qa[name], "question")
            if args.interviews:
                h_over = [*HISTORY_DATA, *llm, f"agent.max_turns={args.turns}", *hist_over]
                if args.guidelines_dir:
                    h_over.append(f"index_dir={args.guidelines_dir}")
                h_cfg = _compose("run_interviews", h_over)
                ledger = _ledger(args.run_dir, "history", name, {"llm": llm, "history": h_over})
                hist[name] = asyncio.run(_history(h_cfg, engine, args.interviews, ledger))
                hist[name].name = name
                _print_arm(f"history agent ({h_cfg.agent.mode}, {args.turns} turns)", hist[name], "interview")
        finally:
            del engine
            gc.collect()
    if len(qa) == 2:
        _compare("QA agent", "question", qa["old"], qa["new"])
    if len(hist) == 2:
        _compare("history agent", "interview", hist["old"], hist["new"])


if __name__ == "__main__":
    main()
