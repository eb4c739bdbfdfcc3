"""Shared by ``run_interviews``: what every interview run needs (the resumable keys, the scorer's gold) and
every arm in one run (``python -m pipelines.run_interviews arms=[single_shot,amq,...] ...``).

One deployment and one worker pool hold every arm's agent; each interview runs its arms in turn (interleaved
per interview), so the arms see the same simulated patients on the same engine at the same time. Each arm
keeps its own run dir ``<run_dir>/arms/<arm>`` (manifest, rows, its own report), so a rerun skips every
(interview, arm) pair already written. The run's ``report.md`` and ``paired.csv`` compare each arm with the
reference arm on ``paired_endpoints`` (``medagent.history.evaluation.paired.arms_comparison``: t and BCa
CIs, sign-flip permutation p, Holm over every comparison reported, n = interviews both arms scored).

Decoding: the arms run at the agent's ``generation.temperature`` (0 in every conf/history_agent file:
greedy; the cost is no sampling diversity, none for these structured replies). Greedy is still not
deterministic where the backend batches conversations together (llama.cpp's slots, vLLM's continuous
batching: a token's logits depend on what shares its forward pass, and greedy paths split on near-ties).
``repeat_arm=<arm>`` runs that arm a second time as ``<arm>_repeat`` and the report prints the run-to-run
spread beside the comparisons; the repeat is in no comparison and no Holm family. The replay patient makes no
model call; a model patient samples at ``eval`` settings, which the report prints.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from medagent.config import HistoryAgentConfig, InterviewRunConfig
from medagent.config.choices import SummaryContext
from medagent.config.legacy import upgrade_history_manifest
from medagent.history import history_mode, needs_history_retrieval, reads_asking_transcript
from medagent.history.agent.information import split_record
from medagent.history.evaluation.instrument import instrument_check
from medagent.history.evaluation.metrics import BertScorer, add_bertscore
from medagent.history.evaluation.paired import (
    arms_comparison,
    arms_markdown,
    paired_difference,
    pairs_csv_rows,
    spread_markdown,
)
from medagent.history.evaluation.report import write_rows
from medagent.history.evaluation.scoring import KEY, endpoint_failed, load_run, score_run
from medagent.interview.sources import load_interviews
from medagent.interview.transcripts import Interview
from medagent.run import RunDir, build_manifest, check_resume
from medagent.run.manifest import git_sha
from pipelines.common import deploy, drain, finished_batches, log, ray_session

CONF = Path(__file__).resolve().parents[1] / "conf"
ARM_KEY = "arm_key"


# Settings that may change between attempts on one run dir: where and how fast it runs, what the report
# draws; everything that shapes an interview (agent, simulator, model, retrieval, seed) must match.
RESUMABLE_KEYS = frozenset(
    {
        "limit", "progress", "cluster", "run_dir", "outputs_root", "data_root", "index_dir", "compare",
        "timeline_interview", "max_error_rate", "error_budget_min_n", "resume_check", "report_only", "*.local_path",
        "llm.request_timeout_s", "llm.max_retries", "llm.api_key_env", "llm.n_threads",
        "agent.max_concurrency", "eval.bertscore_*", "eval.facts_concurrency", "arms", "paired_endpoints", "reference_arm", "repeat_arm",
    }
)  # fmt: skip


def gold_kwargs(cfg: InterviewRunConfig) -> dict[str, Any]:
    """MediTOD's annotated diagnoses for the scorer (differential hit rate); other sources have none."""
    if cfg.interviews.source != "meditod":
        return {}
    from medagent.interview.meditod import gold_diagnoses

    return {"gold_diagnoses": gold_diagnoses(cfg.data_root), "data_root": cfg.data_root}


def _value(v: Any) -> str:
    return (
        json.dumps(v)
        if isinstance(v, (list, dict, str))
        else str(v).lower()
        if isinstance(v, bool)
        else str(v)
    )


def arm_configs(cfg: InterviewRunConfig) -> dict[str, HistoryAgentConfig]:
    """Each arm's agent: its conf/history_agent file composed as ``history_agent=<arm>``, then
    ``arm_overrides``. An arm that summarises a transcript must follow an arm that asks."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    def one(name: str) -> HistoryAgentConfig:
        overrides = [
            f"history_agent={name}",
            *(f"agent.{k}={_value(v)}" for k, v in cfg.arm_overrides.items()),
        ]
        if GlobalHydra.instance().is_initialized():
            composed = compose(config_name="run_interviews", overrides=overrides)
        else:
            with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
                composed = compose(config_name="run_interviews", overrides=overrides)
        return OmegaConf.to_object(composed).agent  # type: ignore[union-attr, no-any-return]

    if len(set(cfg.arms)) != len(cfg.arms):
        raise ValueError(f"arms repeat a name: {cfg.arms}")
    out = {name: one(name) for name in cfg.arms}
    if cfg.repeat_arm is not None:
        if cfg.repeat_arm not in out:
            raise ValueError(f"repeat_arm={cfg.repeat_arm} is not one of the arms {cfg.arms}")
        if repeat_name(cfg.repeat_arm) in out or cfg.reference_arm == repeat_name(cfg.repeat_arm):
            raise ValueError(
                f"{repeat_name(cfg.repeat_arm)} is the repeat's name: no arm or reference_arm may take it"
            )
        out[repeat_name(cfg.repeat_arm)] = one(cfg.repeat_arm)
    asked = False
    for name, agent in out.items():
        if reads_asking_transcript(agent) and not asked:
            raise ValueError(
                f"arm {name} summarises an asking arm's transcript: list it after one (e.g. amq)"
            )
        asked = asked or history_mode(agent.mode).asks_questions
    return out


def repeat_name(arm: str) -> str:
    """The run dir and report name of ``repeat_arm``'s second run."""
    return f"{arm}_repeat"


def _arm_cfg(cfg: InterviewRunConfig, agent: HistoryAgentConfig) -> InterviewRunConfig:
    return replace(cfg, agent=agent, arms=[], compare=[], repeat_arm=None)


def _transcripts(rd: RunDir) -> dict[str, str]:
    """The asking arm's transcripts from earlier attempts of this run, by interview (scored rows only)."""
    from medagent.history.agent.state import InterviewState
    from medagent.history.evaluation.row import InterviewRow

    out = {}
    for d in rd.latest_records(rd.interviews, KEY, endpoint_failed):
        row = InterviewRow.from_dict(d)
        if row.result is not None and row.scored:
            out[str(d[KEY])] = InterviewState.from_dict(row.result["final_state"]).transcript()
    return out


def todo_items(
    arms: dict[str, HistoryAgentConfig], dirs: dict[str, RunDir], interviews: list[Interview]
) -> list[dict[str, Any]]:
    """The (interview, arm) pairs still to run (resume), interview by interview in the configured order.

    An item is one arm, so each pair is written as soon as it ends and an interrupted run loses at most the
    pairs in flight. The transcript control reads the first asking arm's transcript: it shares that arm's item
    (it runs right after it, on the transcript the arm just made), or, when that arm finished in an earlier
    attempt, reads the transcript written then.
    """
    done = {name: dirs[name].completed_keys(dirs[name].interviews, KEY, endpoint_failed) for name in arms}
    asking = next((n for n, a in arms.items() if history_mode(a.mode).asks_questions), None)
    earlier_transcripts: dict[str, str] | None = None  # read once, when a control needs one
    items = []
    for iv in interviews:
        left = [name for name in arms if iv.id not in done[name]]
        groups: list[list[str]] = []
        for name in left:
            if reads_asking_transcript(arms[name]) and asking in left:
                next(g for g in groups if g[0] == asking).append(name)
            else:
                groups.append([name])
        for group in groups:
            earlier = (
                asking is not None
                and asking not in group
                and any(reads_asking_transcript(arms[n]) for n in group)
            )
            if earlier and earlier_transcripts is None and asking:
                earlier_transcripts = _transcripts(dirs[asking])
            transcript = (earlier_transcripts or {}).get(iv.id, "") if earlier else ""
            items.append(
                {"id": iv.id, "interview": iv.to_json(), "arms": json.dumps(group), "transcript": transcript}
            )
    return items


def stream_arm_rows(
    cfg: InterviewRunConfig, arms: dict[str, HistoryAgentConfig], items: list[dict[str, Any]], endpoints: Any
) -> Iterator[list[dict[str, Any]]]:
    import ray

    from actors.builder import interview_worker_map_kwargs
    from actors.interview_worker import InterviewWorker

    ray.data.DataContext.get_current().enable_progress_bars = False
    first = next(iter(arms.values()))
    ds = ray.data.from_items(items).map_batches(
        InterviewWorker,
        fn_constructor_kwargs={
            "agent": asdict(first),
            "eval": asdict(cfg.eval),
            "llm": asdict(cfg.llm),
            "llm_endpoint": endpoints.llm,
            "services_endpoint": endpoints.services,
            "embedder": asdict(cfg.embedder) if cfg.embedder else None,
            "arms": {name: asdict(a) for name, a in arms.items()},
            **gold_kwargs(cfg),
        },
        **interview_worker_map_kwargs(cfg.cluster, max(a.max_concurrency for a in arms.values())),
    )
    for batch in finished_batches(ds, "pandas", llm_bound=True):
        yield [json.loads(r) | {ARM_KEY: a} for r, a in zip(batch["row"], batch[ARM_KEY], strict=True)]


def write_arm_rows(dirs: dict[str, RunDir], rows: list[dict[str, Any]], sha: str | None) -> None:
    for name, rd in dirs.items():
        mine = [r | {"git_sha": sha} for r in rows if r[ARM_KEY] == name]
        if mine:
            rd.append_records(rd.interviews, mine, key=KEY, failed=endpoint_failed)


def run_arms(cfg: InterviewRunConfig) -> dict[str, Any]:
    """Runs every arm on the configured interviews (resumable per pair), then the per-arm and paired reports."""
    arms = arm_configs(cfg)
    data = load_interviews(
        cfg.interviews.name, cfg.interviews.source, cfg.data_root, prefix=cfg.interviews.prefix,
        ids=list(cfg.interviews.ids), limit=cfg.limit,
    )  # fmt: skip
    root = RunDir.create(cfg.run_dir, cfg.outputs_root, f"interviews-{cfg.interviews.name}-arms")
    dirs: dict[str, RunDir] = {}
    for name, agent in arms.items():
        rd = RunDir(root.root / "arms" / name)
        sub = _arm_cfg(cfg, agent)
        previous = upgrade_history_manifest(rd.read_json(rd.manifest))  # older run dirs resume too
        config = json.loads(json.dumps(asdict(sub), default=str))
        if cfg.resume_check:
            done = rd.completed_keys(rd.interviews, KEY, endpoint_failed)
            check_resume(previous, config, RESUMABLE_KEYS, run_dir=str(rd.root), answered=len(done))
        split = split_record(agent, [iv.id for iv in data.interviews])
        files = [*data.files, split[1]] if split else data.files
        extra: dict[str, Any] = {"split": split[0]} if split else {}
        rd.write_json(
            rd.manifest, build_manifest(config, files, previous, n_interviews=len(data.interviews), **extra)
        )
        dirs[name] = rd
    items = todo_items(arms, dirs, data.interviews)
    pairs = sum(len(json.loads(i["arms"])) for i in items)
    log.info(
        "%d interviews x %d arms in %s: %d pairs to go", len(data.interviews), len(arms), root.root, pairs
    )
    if items and cfg.report_only:
        log.warning("report_only: %d pairs not run; the reports cover the pairs already written", pairs)
    elif items:
        with ray_session(cfg.cluster):
            from actors.deploy import needs_for_interviews

            retrieving = next((a for a in arms.values() if needs_history_retrieval(a)), None)
            endpoints = deploy(needs_for_interviews(_arm_cfg(cfg, retrieving or next(iter(arms.values())))))
            sha = git_sha()
            drain(
                stream_arm_rows(cfg, arms, items, endpoints),
                lambda rows: write_arm_rows(dirs, list(rows), sha),
                failed=endpoint_failed, total=pairs, desc=f"{cfg.interviews.name}/arms", unit="pair",
                progress=cfg.progress, min_n=cfg.error_budget_min_n, max_error_rate=cfg.max_error_rate,
                budget_message=lambda failed, done: (
                    f"{failed} of {done} (interview, arm) pairs hit endpoint failures; rerun with "
                    f"run_dir={root.root} to resume once the endpoint is fixed"
                ),
            )  # fmt: skip
    elsewhere = (
        "The instrument check and the comparisons of this arm are in the run's [report](../../report.md)."
    )
    for name, agent in arms.items():
        score_run(_arm_cfg(cfg, agent), dirs[name], data.interviews, instrument=elsewhere)
    return paired_report(cfg, arms, dirs, data.interviews, root, pending=pairs if cfg.report_only else 0)


def instrument_runs(arms: dict[str, HistoryAgentConfig], records: dict[str, Any]) -> list[tuple[str, Any]]:
    """The arms that read a fixed context (the oracle, the opening-only baseline), named as the instrument
    check names them (``single_shot:<context>``), with their records."""
    return [
        (f"single_shot:{SummaryContext(a.single_shot.context).value}", records[n])
        for n, a in arms.items()
        if history_mode(a.mode).reads_context
    ]


def paired_report(
    cfg: InterviewRunConfig,
    arms: dict[str, HistoryAgentConfig],
    dirs: dict[str, RunDir],
    interviews: list[Interview],
    root: RunDir,
    pending: int = 0,
) -> dict[str, Any]:
    """``report.md`` and ``paired.csv`` of the run: every arm against the reference arm (module docstring).
    ``pending``: (interview, arm) pairs not yet run (an interim report says so at its top)."""
    ids = {iv.id for iv in interviews}
    runs = {name: load_run(name, dirs[name].root, ids) for name in arms}
    scorer = BertScorer.from_config(cfg.eval)
    for r in runs.values():
        add_bertscore(r.records, scorer)
    reference = cfg.reference_arm or cfg.arms[0]
    repeat = repeat_name(cfg.repeat_arm) if cfg.repeat_arm else None
    compared = {n: r.records for n, r in runs.items() if n != repeat}
    rows = arms_comparison(compared, cfg.paired_endpoints, reference, seed=cfg.seed)
    spread = (
        [
            paired_difference(
                runs[cfg.repeat_arm].records,
                runs[repeat].records,
                e,
                arm_a=cfg.repeat_arm,
                arm_b=repeat,
                seed=cfg.seed,
            )  # fmt: skip
            for e in cfg.paired_endpoints
        ]
        if cfg.repeat_arm and repeat
        else []
    )
    shas = sorted({str(row.get("git_sha")) for r in runs.values() for row in r.rows.values()})
    lines = [f"# History taking, every arm in one run: {cfg.interviews.name}, llm={cfg.llm.name}", ""]
    asked = {n: a for n, a in arms.items() if n != repeat}
    check = instrument_check(instrument_runs(asked, compared), seed=cfg.seed)
    lines += [check.markdown(), ""]
    if pending:
        written = sum(len(r.rows) for r in runs.values())
        lines += [f"**Interim report: {written} (interview, arm) pairs written, {pending} still to run.** "
                  "Each comparison uses the interviews both of its arms finished.", ""]  # fmt: skip
    if len(shas) != 1:
        lines += [f"**The rows were made by different code: git SHAs {', '.join(shas)}.**", ""]
    lines += [
        f"Code: {shas[0] if len(shas) == 1 else 'mixed'}. Arms: {', '.join(arms)}; reference: {reference}. "
        f"Primary endpoint: {cfg.paired_endpoints[0]}; secondary: {', '.join(cfg.paired_endpoints[1:]) or 'none'}. "
        f"Decoding: agent temperature {', '.join(sorted({str(a.generation.temperature) for a in arms.values()}))}, "
        f"seed {cfg.seed}. Holm over the {len(rows)} comparisons below; n = interviews both arms scored.",
        "",
        arms_markdown(rows),
        "",
        *(
            spread_markdown(spread)
            if spread
            else [
                "No arm was repeated (`repeat_arm`): the run-to-run spread of the decoding is not measured here.",
                "",
            ]
        ),
        "Per-arm reports: " + ", ".join(f"[{n}](arms/{n}/report.md)" for n in arms),
        "",
    ]
    root.root.mkdir(parents=True, exist_ok=True)
    (root.root / "report.md").write_text("\n".join(lines), encoding="utf-8")
    write_rows(root.root / "paired.csv", pairs_csv_rows(rows))
    result = {"arms": list(arms), "reference": reference, "git_shas": shas, "paired": [
        {k: v for k, v in r.to_dict().items() if k != "pairs"} for r in rows
    ], "repeat": [{k: v for k, v in r.to_dict().items() if k != "pairs"} for r in spread]}  # fmt: skip
    root.write_json(root.root / "metrics.json", result)
    print("\n".join(lines))
    print(f"\nrun directory: {root.root}")
    return result
