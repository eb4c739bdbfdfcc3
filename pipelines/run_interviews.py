"""History taking: ``python -m pipelines.run_interviews interviews=osce_res history_agent=amq|single_shot limit=N``.

Each interview is a Ray Data row; ``InterviewWorker`` actors run the agent against an LLM patient grounded
in that interview (``medagent.history.session.evaluate_interview``): ``history_agent=amq`` asks adaptively, then
assesses from a clinical summary grounded in parent–child guideline retrieval (the serving application's
Retriever over ``index_dir``, hybrid, parents returned); ``history_agent=single_shot`` is the paper's baseline (one
summary of the interview, one assessment, no retrieval). Both are scored against the physician's own
closing statement, which the simulator and the baseline never see.

Run dir: ``interviews.jsonl`` (one row per interview; a rerun with the same ``run_dir`` skips interview ids
already written), then, computed from all rows at the end: ``interviews.csv``, ``metrics.json`` (BERTScore
once for the whole run), ``report.md``, ``figures/*.png`` and ``manifest.json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from medagent.config import InterviewRunConfig
from medagent.history.evaluate import (
    BertScorer,
    add_bertscore,
    add_lexical_repeats,
    add_physician_hits,
    disease_canonical,
    physician_diagnoses,
)
from medagent.history.fidelity import FidelityScorer, add_lexical_fidelity
from medagent.history.information import split_record
from medagent.history.paired import paired_table, pairs_csv_rows
from medagent.history.reference import extract_reference, visible_turns
from medagent.history.repeats import TopicRepeats
from medagent.history.report import (
    RunRecords,
    format_table,
    pick_timeline,
    scores_figure,
    timeline_figure,
    turns_figure,
    write_csv,
    write_report,
    write_rows,
)
from medagent.history.session import arm_name, closing_rule
from medagent.interview.sources import load_interviews
from medagent.interview.transcripts import Interview
from medagent.llm.endpoints import Endpoints
from medagent.run import RunDir, build_manifest, check_resume
from pipelines.common import (
    deploy,
    drain,
    finished_batches,
    log,
    ray_session,
    setup_logging,
)

KEY = "interview_id"


def gold_kwargs(cfg: InterviewRunConfig) -> dict[str, Any]:
    """MediTOD's annotated diagnoses for the scorer (differential hit rate); other sources have none."""
    if cfg.interviews.source != "meditod":
        return {}
    from medagent.interview.meditod import gold_diagnoses

    return {"gold_diagnoses": gold_diagnoses(cfg.data_root), "data_root": cfg.data_root}


def stream_rows(
    cfg: InterviewRunConfig,
    todo: list[Interview],
    endpoints: Endpoints,
) -> Iterator[list[dict[str, Any]]]:
    """Shards ``todo`` over ``InterviewWorker`` actors with Ray Data; yields rows batch by batch."""
    import ray

    from actors.builder import interview_worker_map_kwargs
    from actors.interview_worker import InterviewWorker

    ray.data.DataContext.get_current().enable_progress_bars = False  # our tqdm bar counts interviews
    own = own_transcripts(cfg)
    items = [
        {"id": iv.id, "interview": iv.to_json()} | ({"transcript": own[iv.id]} if own else {}) for iv in todo
    ]
    ds = ray.data.from_items(items).map_batches(
        InterviewWorker,
        fn_constructor_kwargs={
            "agent": asdict(cfg.agent),
            "eval": asdict(cfg.eval),
            "llm": asdict(cfg.llm),
            "llm_endpoint": endpoints.llm,
            "services_endpoint": endpoints.services,
            "embedder": asdict(cfg.embedder) if cfg.embedder else None,
            **gold_kwargs(cfg),
        },
        **interview_worker_map_kwargs(cfg.cluster, cfg.agent.max_concurrency),
    )
    for batch in finished_batches(ds, "pandas", llm_bound=True):
        yield [json.loads(s) for s in batch["row"]]


def own_transcripts(cfg: InterviewRunConfig) -> dict[str, str]:
    """Interview id -> the amq agent's transcript in ``agent.transcript_run`` (single_shot,
    context=transcript_run); empty for every other config. Interviews the amq run did not finish (error or
    skipped rows) have no transcript."""
    if cfg.agent.mode != "single_shot" or cfg.agent.context != "transcript_run":
        return {}
    if not cfg.agent.transcript_run:
        raise ValueError("agent.context=transcript_run needs agent.transcript_run=/abs/finished/amq/run_dir")
    from medagent.history.state import InterviewState

    rd = RunDir(Path(cfg.agent.transcript_run), read_only=True)
    out = {}
    for row in rd.latest_records(rd.interviews, KEY, endpoint_failed):
        result = row.get("result") or {}
        if row.get("error") or row.get("skipped") or result.get("mode") != "amq":
            continue
        out[row[KEY]] = InterviewState.from_dict(result["final_state"]).transcript()
    if not out:
        raise ValueError(f"no finished amq interview in {cfg.agent.transcript_run}")
    return out


# Settings that may change between attempts on one run dir: where and how fast it runs, what the report
# draws; everything that shapes an interview (agent, simulator, model, retrieval, seed) must match.
RESUMABLE_KEYS = frozenset(
    {
        "limit", "progress", "cluster", "run_dir", "outputs_root", "data_root", "index_dir", "compare",
        "timeline_interview", "max_error_rate", "error_budget_min_n", "resume_check", "*.local_path",
        "llm.request_timeout_s", "llm.max_retries", "llm.api_key_env", "llm.n_threads",
        "agent.max_concurrency", "eval.bertscore_*",
    }
)  # fmt: skip


def endpoint_failed(row: dict[str, Any]) -> bool:
    """An interview cut short by an LLM / retriever failure (``error``): the next run asks it again."""
    return bool(row.get("error"))


def _interview_with_ray(cfg: InterviewRunConfig, todo: list[Interview], rd: RunDir) -> None:
    with ray_session(cfg.cluster):
        from actors.deploy import needs_for_interviews

        endpoints = deploy(needs_for_interviews(cfg))
        drain(
            stream_rows(cfg, todo, endpoints),
            lambda rows: rd.append_records(rd.interviews, list(rows), key=KEY, failed=endpoint_failed),
            failed=endpoint_failed,
            total=len(todo),
            desc=f"{cfg.interviews.name}/{cfg.agent.mode}",
            unit="interview",
            progress=cfg.progress,
            min_n=cfg.error_budget_min_n,
            max_error_rate=cfg.max_error_rate,
            budget_message=lambda failed, done: (
                f"{failed} of {done} interviews hit endpoint failures (> max_error_rate="
                f"{cfg.max_error_rate}); see 'error' in {rd.interviews}. Rerun with "
                f"run_dir={rd.root} to resume once the endpoint is fixed (finished interviews are kept)."
            ),
        )


def _load_run(label: str, root: Path, wanted: set[str] | None = None) -> RunRecords:
    rd = RunDir(root, read_only=True)
    rows = rd.latest_records(rd.interviews, KEY, endpoint_failed)
    return RunRecords.from_rows(label, [r for r in rows if wanted is None or r[KEY] in wanted])


def _label(rows: RunRecords, fallback: str) -> str:
    """The run's arm (``arm`` of its rows, e.g. ``single_shot:opening``; older rows: their mode)."""
    arms = {str(r.get("arm") or r.get("mode") or "") for r in rows.rows.values() if not r.get("skipped")}
    return arms.pop() if len(arms) == 1 and "" not in arms else fallback


def scoring_note(cfg: InterviewRunConfig) -> str:
    m = cfg.eval.bertscore_model
    return (
        f"BERTScore F1 backbone: {m.hub_id or m.name}, layer {cfg.eval.bertscore_num_layers}, no baseline "
        "rescaling (every run of this report re-scored with it). Differential hit: MediTOD gold where "
        "annotated, else the physician's diagnoses found by the lexicon annotator in the full transcript."
    )


def report(cfg: InterviewRunConfig, rd: RunDir, interviews: list[Interview]) -> dict[str, Any]:
    """Scores every row of the run (BERTScore once), writes CSV, metrics, figures and the report."""
    ids = {iv.id for iv in interviews}
    run = _load_run(arm_name(cfg.agent), rd.root, ids)
    scorer = BertScorer.from_config(cfg.eval)
    add_bertscore(run.records, scorer)
    # Compared runs are read over this run's interviews only: every row of the table is then over the same
    # items, and their sources and physician diagnoses (built from `interviews`) cover all their rows.
    compared = [_load_run(Path(p).name, Path(p), ids) for p in cfg.compare]
    for other in compared:  # rows keep no BERTScore: it is computed per report, with this run's scorer
        other.label = _label(other, other.label)
        add_bertscore(other.records, scorer)
    runs = [run, *compared]
    repeats = TopicRepeats.from_data_root(cfg.data_root)
    fidelity = FidelityScorer.from_data_root(cfg.data_root)
    rule = closing_rule(cfg.eval)
    sources = {  # what the simulator was grounded in: the visible turns
        iv.id: replace(iv, turns=visible_turns(iv, extract_reference(iv, rule))) for iv in interviews
    }
    for r in runs:  # a second opinion on repeated questions, sharing nothing with the blocking control
        add_lexical_repeats(r.records, r.rows, repeats)
        add_lexical_fidelity(r.records, r.rows, sources, fidelity)
    if cfg.interviews.source != "meditod":  # MediTOD rows were scored against the annotated gold
        gold = physician_diagnoses(interviews, cfg.data_root)
        canonical = disease_canonical(cfg.data_root)
        for r in runs:
            add_physician_hits(r.records, gold, canonical)
    paired = [
        d
        for other in compared
        for d in paired_table(other.records, run.records, arm_a=other.label, arm_b=run.label, seed=cfg.seed)
    ]
    metrics = [r.metrics() for r in runs]
    write_csv(run, rd.interviews_csv)
    write_rows(rd.root / "paired.csv", pairs_csv_rows(paired))
    rd.figures_dir.mkdir(exist_ok=True)
    figures = [
        scores_figure(runs, rd.figures_dir / "scores.png"),
        turns_figure(runs, rd.figures_dir / "turns.png"),
    ]
    row = next((pick_timeline(r, cfg.timeline_interview) for r in runs if pick_timeline(r)), None)
    if row is not None and (fig := timeline_figure(row, rd.figures_dir / "timeline.png")):
        figures.append(fig)
    title = f"History taking: {cfg.interviews.name}, arm={run.label}, llm={cfg.llm.name}"
    write_report(runs, metrics, figures, rd.report_md, title=title, paired=paired, scoring=scoring_note(cfg))
    result = metrics[0] | {
        "arm": run.label,
        "paired": [{k: v for k, v in d.to_dict().items() if k != "pairs"} for d in paired],
        "run_dir": str(rd.root),
        "interviews": cfg.interviews.name,
        "agent": cfg.agent.mode,
        "llm": cfg.llm.name,
        "compare": {r.label: m for r, m in zip(compared, metrics[1:], strict=True)},
    }
    rd.write_json(rd.metrics, result)
    print("\n" + format_table([(r.label, m) for r, m in zip(runs, metrics, strict=True)]))
    return result


def run(cfg: InterviewRunConfig) -> dict[str, Any]:
    """Runs the configured interviews (resumable), then scores and reports; returns the metrics."""
    data = load_interviews(
        cfg.interviews.name,
        cfg.interviews.source,
        cfg.data_root,
        prefix=cfg.interviews.prefix,
        ids=list(cfg.interviews.ids),
        limit=cfg.limit,
    )
    rd = RunDir.create(cfg.run_dir, cfg.outputs_root, f"interviews-{cfg.interviews.name}-{cfg.agent.mode}")
    done = rd.completed_keys(rd.interviews, KEY, endpoint_failed)
    previous = rd.read_json(rd.manifest)
    config = json.loads(json.dumps(asdict(cfg), default=str))  # as the manifest stores it
    if cfg.resume_check:  # interviews run under other settings never mix into one report
        check_resume(previous, config, RESUMABLE_KEYS, run_dir=str(rd.root), answered=len(done))
    # policy=information and the physician order are learned from the training split: refuse to evaluate a
    # training interview, and record the split (and checksum its table) in the manifest.
    split = split_record(cfg.agent, [iv.id for iv in data.interviews])
    files = [*data.files, split[1]] if split else data.files
    extra: dict[str, Any] = {"split": split[0]} if split else {}
    manifest = build_manifest(config, files, previous, n_interviews=len(data.interviews), **extra)
    rd.write_json(rd.manifest, manifest)
    todo = [iv for iv in data.interviews if iv.id not in done]
    if own := own_transcripts(cfg):  # the control summarises amq's interviews: only those it finished
        missing = [iv.id for iv in todo if iv.id not in own]
        if missing:
            log.warning(
                "%d interviews have no amq transcript in %s: %s",
                len(missing),
                cfg.agent.transcript_run,
                missing,
            )
        todo = [iv for iv in todo if iv.id in own]
    log.info(
        "%s: %d interviews, %d already run in %s, %d to go (agent=%s)",
        cfg.interviews.name, len(data.interviews), len(data.interviews) - len(todo), rd.root, len(todo),
        cfg.agent.mode,
    )  # fmt: skip
    if todo:
        _interview_with_ray(cfg, todo, rd)
    result = report(cfg, rd, data.interviews)
    print(f"\nrun directory: {rd.root}")
    return result


ConfigStore.instance().store(name="interview_run_schema", node=InterviewRunConfig)


@hydra.main(config_path="../conf", config_name="run_interviews", version_base="1.3")
def main(cfg: DictConfig) -> None:
    setup_logging()
    run_cfg: InterviewRunConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    # Actors run in other working directories: hand them absolute paths.
    for name in ("run_dir", "index_dir", "data_root"):
        value = getattr(run_cfg, name)
        if value and not Path(value).is_absolute():
            setattr(run_cfg, name, str(Path(value).resolve()))
    run_cfg.compare = [str(Path(p).resolve()) for p in run_cfg.compare]
    run(run_cfg)


if __name__ == "__main__":
    main()
