"""Validates the simulated patients on the physicians' own questions of held-out RES interviews.

One command, one table per patient (``medagent.history.evaluation.patient_validation`` defines the probes,
the units and the four measures: supported, disclosed, false "not sure", invented):

    python benchmarks/validate_patients.py --patients replay                       # all 54 eval interviews
    python benchmarks/validate_patients.py --patients replay,simulator,facts --units facts \\
        --limit 4 --max-probes 8 --facts-dir outputs/facts                         # the model patients

The replay threshold is chosen first, on ``--train-limit`` training interviews of the fixed RES split
(other wording, and agent wording on ``--agent-train-limit`` of them when ``--wording`` names it;
``choose_threshold``), unless ``--replay-threshold`` is given. Agent wording is the ``--llm`` model asking
for what each physician question asks, in the agent's voice (``agent_wording``; cached under
``--reword-dir``):

    python benchmarks/validate_patients.py --patients replay --wording own,other,agent --limit 24 \
        --max-probes 12                                                            # the agent's wording
 The model patients (the LLM
simulator shown transcript excerpts, and the fact patient) run on the CPU model of ``--llm`` (llama.cpp),
as ``pipelines/run_interviews.py`` does; ``--units facts`` extracts each interview's facts with it once
(cached under ``--facts-dir``). Writes ``validation.md`` and ``validation.json`` to ``--out``.
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

from medagent.config import InterviewEvalConfig  # noqa: E402
from medagent.history.agent.information import DEFAULT_EVAL_FRACTION, DEFAULT_SALT, split_ids  # noqa: E402
from medagent.history.evaluation import agent_wording as aw  # noqa: E402
from medagent.history.evaluation import patient_validation as pv  # noqa: E402
from medagent.history.evaluation import replay_validation as rv  # noqa: E402
from medagent.history.evaluation.facts_metrics import FactMatcher, clauses  # noqa: E402
from medagent.history.facts.annotations import crosscheck, load_meditod_units  # noqa: E402
from medagent.history.facts.store import FactSet  # noqa: E402
from medagent.history.simulation.replay import ReplayPatient, exchange_matches, transcript_exchanges  # noqa: E402
from medagent.interview.transcripts import Interview, load_transcripts  # noqa: E402


def _embedder() -> Any:
    from medagent.config.interview import _minilm
    from medagent.history.agent.redundancy import SentenceEmbedder
    from medagent.retrieval.config import EmbedderConfig

    return SentenceEmbedder.from_config(EmbedderConfig(name="minilm", model=_minilm()), device="cpu")


def _llm(name: str) -> Any:
    from hydra import compose, initialize_config_module
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from medagent.config import InterviewRunConfig
    from medagent.llm.llamacpp import LlamaCppEngine, LlamaCppSettings
    from medagent.models import resolve_model

    ConfigStore.instance().store(name="interview_run_schema", node=InterviewRunConfig)
    with initialize_config_module("conf", version_base=None):
        raw = compose("run_interviews", overrides=[f"llm={name}"])
    cfg: InterviewRunConfig = OmegaConf.to_object(raw)  # type: ignore[assignment]
    return LlamaCppEngine(
        resolve_model(cfg.llm.model.spec()),
        LlamaCppSettings(n_ctx=cfg.llm.n_ctx, n_parallel=cfg.llm.n_parallel, n_threads=cfg.llm.n_threads),
        name=cfg.llm.served_name,
    ), cfg


def warm(embedder: pv.CachedEmbedder, seen: dict[str, Any]) -> None:
    """Encodes, in one batch, every doctor question, patient sentence and patient clause of ``seen``: the
    texts the probes, the replayed answers and their scoring ask about (one encode call per text costs
    about as much as a batch on a loaded CPU)."""
    texts = [x.doctor for turns in seen.values() for x in transcript_exchanges(turns)]
    for i, turns in seen.items():
        texts += [u.statement for u in pv.sentence_units(i, turns).facts]
        texts += [c for t in turns if t.speaker == "patient" for c in clauses(t.text)]
    embedder.encode(list(dict.fromkeys(texts)))


async def rewordings(
    llm: Any, cfg: Any, seen: dict[str, Any], max_probes: int | None, root: Path, out: dict[str, Any]
) -> dict[str, str]:
    """The agent model's wording of the sampled physician questions of ``seen`` (cached under ``root``);
    counts what was asked and what failed into ``out["reword"]``."""
    questions = [p.question for i, t in seen.items() for p in rv.sample(pv.probes(i, t, "own"), max_probes)]
    cache = aw.RewordCache.open(root, cfg.llm.served_name)
    before = len(cache.items)
    t0 = time.perf_counter()
    bar: Any = None

    def tick(total: int) -> None:
        nonlocal bar
        if bar is None:
            from tqdm import tqdm

            bar = tqdm(total=total, desc="rewording questions", unit="q")
        bar.update(1)

    try:
        got, errors = await aw.reword(
            llm, questions, cache, json_schema_ok=cfg.llm.supports_json_schema, on_done=tick
        )
    finally:
        if bar is not None:
            bar.close()
    stats = out.setdefault("reword", {"questions": 0, "asked": 0, "failed": [], "seconds": 0.0})
    stats["questions"] += len(set(questions))
    stats["asked"] += len(cache.items) - before + len(errors)
    stats["failed"] += errors
    stats["seconds"] = round(stats["seconds"] + time.perf_counter() - t0, 1)
    stats["cache"] = str(cache.path)
    return got


def replay_threshold(
    train: list[Interview],
    embedder: pv.CachedEmbedder,
    matcher: FactMatcher,
    reworded: dict[str, str] | None = None,
    keys: str = "exchange",
) -> tuple[float, int, int]:
    """``choose_threshold`` on the training interviews (sentence units): probes in other wording, in
    agent wording where ``reworded`` is given, and in own wording with the asked exchange left out."""
    seen = {iv.id: rv.seen_turns(iv) for iv in train}
    pool = [(i, x.doctor) for i, turns in seen.items() for x in transcript_exchanges(turns)]
    warm(embedder, seen)
    outcomes: list[tuple[float, bool]] = []
    for i, turns in seen.items():
        xs = transcript_exchanges(turns)
        units = pv.sentence_units(i, turns)
        ps = pv.probes(i, turns, "other", pool=pool, embedder=embedder)
        if reworded is not None:
            ps += pv.probes(i, turns, "agent", reworded=reworded)
        sims = exchange_matches(embedder, [p.question for p in ps], xs, keys)
        outcomes += pv.replay_outcomes(xs, ps, sims, units, matcher)
        # Every probe above has its answer in the transcript; the physician's own question with its own
        # exchange left out is the case where it may not, and "I don't know" can be right.
        own = pv.probes(i, turns, "own")
        outcomes += pv.replay_outcomes(xs, own, rv.left_out_matches(embedder, own, xs, keys), units, matcher)
    t, utility = pv.choose_threshold([s for s, _ in outcomes], [c for _, c in outcomes])
    return t, utility, len(outcomes)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    embedder = pv.CachedEmbedder(_embedder())
    matcher = FactMatcher(embedder, args.match_threshold)
    ids = [p.stem for p in load_transcripts("RES", args.data_root)[1]]
    train_ids, eval_ids = split_ids(ids, DEFAULT_EVAL_FRACTION, DEFAULT_SALT)
    out: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    t0 = time.perf_counter()
    wordings = args.wording.split(",")
    patients = args.patients.split(",")
    llm = cfg = None
    if any(p != "replay" for p in patients) or args.units == "facts" or "agent" in wordings:
        llm, cfg = _llm(args.llm)
    keys_list = args.replay_keys.split(",")
    if any(k not in ("exchange", "clauses") for k in keys_list) or len(keys_list) > 2:
        raise SystemExit(f"--replay-keys: one or two of exchange, clauses; got {args.replay_keys!r}")
    thresholds: dict[str, float] = {}
    out["replay_threshold"] = {}
    if args.replay_threshold is None:
        train, _ = load_transcripts("RES", args.data_root, ids=train_ids[: args.train_limit])
        reworded = None
        if "agent" in wordings:
            # The threshold is chosen on the wording it will meet; agent wording of the training interviews
            # costs one model call per question, so it is asked of ``--agent-train-limit`` of them.
            some = {iv.id: rv.seen_turns(iv) for iv in train[: args.agent_train_limit]}
            reworded = await rewordings(llm, cfg, some, args.max_probes, args.reword_dir, out)
        for k in keys_list:
            thr, utility, n = replay_threshold(train, embedder, matcher, reworded, k)
            thresholds[k] = thr
            out["replay_threshold"][k] = {
                "value": thr, "utility": utility, "probes": n, "interviews": len(train),
                "agent_wording_interviews": args.agent_train_limit if reworded is not None else 0,
            }  # fmt: skip
    else:
        thresholds = dict.fromkeys(keys_list, args.replay_threshold)
        out["replay_threshold"] = {k: {"value": args.replay_threshold, "given": True} for k in keys_list}
    evals, _ = load_transcripts("RES", args.data_root, ids=eval_ids[: args.limit] if args.limit else eval_ids)
    seen: dict[str, Any] = {iv.id: rv.seen_turns(iv) for iv in evals}
    eval_reworded = (
        await rewordings(llm, cfg, seen, args.max_probes, args.reword_dir, out)
        if "agent" in wordings
        else None
    )
    annotated = load_meditod_units(seen, args.data_root)
    if args.units == "meditod":  # only the annotated eval interviews
        seen = {i: t for i, t in seen.items() if i in annotated}
    pool = [(i, x.doctor) for i, turns in seen.items() for x in transcript_exchanges(turns)]
    warm(embedder, seen)
    # The embedding match against MediTOD's annotations, on the annotated eval interviews (module docstring
    # of patient_validation.matcher_agreement); printed so a reader sees what FactMatcher's cosine does.
    out["matcher_agreement"] = {
        i: pv.matcher_agreement(u, seen[i], matcher) for i, u in annotated.items() if i in seen
    }
    facts: dict[str, FactSet] = {}
    if args.units == "facts":
        from medagent.history.evaluation.runner import case_facts
        from medagent.llm.usage import UsageRecord

        assert llm is not None and cfg is not None
        ecfg = cfg.eval
        ecfg.facts_dir = args.facts_dir
        for i, turns in seen.items():
            facts[i] = await case_facts(
                llm, i, turns, ecfg, cfg.llm.supports_json_schema, UsageRecord.calls()
            )
        out["facts"] = {
            i: {"facts": len(f.facts), "set_aside": len(f.set_aside), "errors": len(f.errors)}
            | ({"meditod_crosscheck": crosscheck(f, annotated[i], matcher)} if i in annotated else {})
            for i, f in facts.items()
        }
    rows: list[pv.PatientScores] = []
    results: dict[str, list[dict[str, Any]]] = {}
    by_name: dict[tuple[str, str], list[pv.ProbeResult]] = {}
    runs = [(kind, k) for kind in patients for k in (keys_list if kind == "replay" else keys_list[:1])]
    for wording in wordings:
        for kind, keys in runs:
            name = _name(kind, keys, keys_list)
            res: list[pv.ProbeResult] = []
            for i, turns in _progress(seen, f"{name}, {wording} wording"):
                # The same exchanges in every wording: sampled in own wording, then worded.
                picked = {p.exchange for p in rv.sample(pv.probes(i, turns, "own"), args.max_probes)}
                ps = pv.probes(i, turns, wording, pool=pool, embedder=embedder, reworded=eval_reworded)
                ps = [p for p in ps if p.exchange in picked]
                units = (
                    facts[i] if args.units == "facts"
                    else annotated[i] if args.units == "meditod"
                    else pv.sentence_units(i, turns)
                )  # fmt: skip
                patient = _patient(kind, llm, cfg, turns, embedder, thresholds[keys], facts.get(i), keys)
                res += await pv.run_probes(patient.answer, ps, units, turns, matcher)
            rows.append(pv.summarise(name, wording, args.units, res))
            by_name[(name, wording)] = res
            results[f"{name}/{wording}"] = [
                {"id": r.probe.interview_id, "q": r.probe.question, "a": r.answer, "gold": r.n_gold,
                 "disclosed": r.n_disclosed, "no_answer": r.no_answer, "supported": r.supported}
                for r in res
            ]  # fmt: skip
    asked_rows: list[pv.AskedScores] = []
    if args.asked_from:
        # The agents' own questions, posed to every patient on the same interviews: sampled per interview as
        # the probes are, and scored against the same units.
        asked: dict[str, list[pv.Probe]] = {}
        for q in rv.asked_probes(args.asked_from, list(seen)):
            asked.setdefault(q.interview_id, []).append(q)
        for kind, keys in runs:
            name = _name(kind, keys, keys_list)
            res = []
            for i, turns in _progress(seen, f"{name}, agents' questions"):
                ps = rv.sample(asked.get(i, []), args.max_probes)
                if not ps:
                    continue
                units = facts[i] if args.units == "facts" else pv.sentence_units(i, turns)
                patient = _patient(kind, llm, cfg, turns, embedder, thresholds[keys], facts.get(i), keys)
                res += await pv.run_probes(patient.answer, ps, units, turns, matcher)
            asked_rows.append(pv.summarise_asked(name, res))
            results[f"{name}/asked"] = [
                {"id": r.probe.interview_id, "q": r.probe.question, "a": r.answer,
                 "no_answer": r.no_answer, "clauses": r.clauses, "clauses_supported": r.clauses_supported}
                for r in res
            ]  # fmt: skip
        out["asked_table"] = [r.to_dict() for r in asked_rows]
        out["asked"] = {
            k: rv.asked_by_agents(args.asked_from, embedder, thresholds[k], k, args.data_root)
            for k in keys_list
        }
    compared = ""
    if "replay" in patients and len(keys_list) == 2:
        compared = pv.paired_rates_table(
            rv.compare_keys(by_name, keys_list, thresholds, seen, embedder, args.max_probes, wordings)
        )
        out["keys_comparison"] = compared
    out["table"] = [r.to_dict() for r in rows]
    out["seconds"] = round(time.perf_counter() - t0, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    text = pv.table(rows) + (f"\n\nPaired by interview (b − a):\n\n{compared}" if compared else "")
    if asked_rows:
        text += "\n\nThe agents' own questions (no gold):\n\n" + pv.asked_table(asked_rows)
    (args.out / "validation.md").write_text(text + "\n", encoding="utf-8")
    (args.out / "validation.json").write_text(
        json.dumps(out | {"answers": results}, indent=1), encoding="utf-8"
    )
    print(json.dumps(out["replay_threshold"]))
    print(json.dumps(out["matcher_agreement"]))
    print(text)
    for keys, asked in out.get("asked", {}).items():
        for arm, row in asked.items():
            print(f"asked by {arm} ({keys} keys, threshold {thresholds[keys]}): {json.dumps(row)}")
    print(f"{out['seconds']} s")
    return out


def _name(kind: str, keys: str, keys_list: list[str]) -> str:
    """A patient's row name: the replay patient is named by its keys when two are compared."""
    return f"{kind}[{keys}]" if kind == "replay" and len(keys_list) > 1 else kind


def _progress(seen: dict[str, Any], desc: str) -> Any:
    """Interviews with a progress bar on stderr: a model patient takes minutes per interview on CPU."""
    from tqdm import tqdm

    return tqdm(seen.items(), desc=desc, unit="interview", file=sys.stderr)


def _patient(
    kind: str, llm: Any, cfg: Any, turns: Any, embedder: Any, thr: float, facts: FactSet | None, keys: str
) -> Any:
    from medagent.history.simulation.fact_patient import FactPatient
    from medagent.history.simulation.simulator import PatientSimulator

    if kind == "replay":
        return ReplayPatient(turns, embedder, thr, keys=keys)
    if kind == "simulator":
        return PatientSimulator(llm, turns, cfg.eval, embedder)
    if kind == "facts":
        if facts is None:
            raise SystemExit("--patients facts needs --units facts (the fact patient answers from the facts)")
        return FactPatient(llm, facts, embedder, k=cfg.eval.fact_patient_k)
    raise SystemExit(f"unknown patient {kind!r} (replay, simulator, facts)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patients", default="replay", help="comma list of replay, simulator, facts")
    ap.add_argument(
        "--wording", default="own,other",
        help="comma list of own, other, agent (agent: the --llm model rewords each question; also used "
        "to choose the replay threshold)",
    )  # fmt: skip
    ap.add_argument(
        "--agent-train-limit", type=int, default=10,
        help="training interviews whose questions are reworded for the threshold (agent wording)",
    )  # fmt: skip
    ap.add_argument("--reword-dir", type=Path, default=Path("outputs/rewords"), help="rewording cache")
    ap.add_argument(
        "--units", default="sentences", choices=("sentences", "facts", "meditod"),
        help="gold units: answer sentences, extracted facts (model), or MediTOD's annotations (RES0045, RES0054)",
    )  # fmt: skip
    ap.add_argument("--limit", type=int, default=None, help="first N eval interviews (default all 54)")
    ap.add_argument("--max-probes", type=int, default=None, help="probes per interview, evenly spaced")
    ap.add_argument(
        "--train-limit", type=int, default=40, help="training interviews for the replay threshold"
    )
    ap.add_argument("--replay-threshold", type=float, default=None)
    ap.add_argument(
        "--asked-from", type=Path, nargs="*", default=[],
        help="arm dirs of an interview run: the questions the agent asked there (after the opening), posed to "
        "every --patients patient on the interviews of --limit that the dirs hold (--max-probes per "
        "interview); prints each patient's answered share, answered with support, and invented clauses, and "
        "the replay's answered share over all of the dirs' rows",
    )  # fmt: skip
    ap.add_argument(
        "--replay-keys", default=InterviewEvalConfig().replay_keys.value,
        help="what the replay patient compares a question with (eval.replay_keys, whose default is this "
        "one's): exchange or clauses, or "
        "both (exchange,clauses: each on the same probes, and the two compared paired by interview)",
    )  # fmt: skip
    ap.add_argument("--match-threshold", type=float, default=0.6, help="FactMatcher cosine")
    ap.add_argument("--llm", default="qwen2.5-coder-1.5b-cpu")
    ap.add_argument("--facts-dir", default="outputs/facts")
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--out", type=Path, default=Path("outputs/validate_patients"))
    asyncio.run(main(ap.parse_args()))
