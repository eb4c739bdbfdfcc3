"""History taking: ``python -m pipelines.run_interviews interviews=osce_res history_agent=amq|single_shot limit=N``.

Each interview is a Ray Data row; ``InterviewWorker`` actors run the agent against a patient built from that
interview (``eval.patient``: ``replay``, the patient's own words for the closest physician question, by
default; ``facts`` or ``simulator``, model patients; ``medagent.history.evaluation.runner.evaluate_interview``).
``history_agent=amq`` asks adaptively, then assesses from a clinical summary grounded in parent–child
guideline retrieval (the serving application's Retriever over ``index_dir``, hybrid, parents returned);
``history_agent=single_shot`` is the paper's baseline (one summary of the interview, one assessment, no
retrieval). Both are scored against the case's facts and the physician's own closing statement, which no
agent sees.

Run dir: ``interviews.jsonl`` (one row per interview; a rerun with the same ``run_dir`` skips interview ids
already written), then, computed from all rows at the end: ``interviews.csv``, ``metrics.json`` (BERTScore
once for the whole run), ``report.md``, ``figures/*.png`` and ``manifest.json``.

**Every arm in one run** (``arms=[single_shot,single_shot_oracle,amq,...]``, ``run_arms``): one deployment,
one worker pool holding every arm's agent; each interview runs all its arms in turn (interleaved per
interview, the transcript control after the asking arm whose transcript it reads). Each arm keeps its own
run dir under ``<run_dir>/arms/<arm>`` (manifest, rows, per-arm report), so a rerun skips every (interview,
arm) pair already written and runs only the rest. Every row records the git SHA of the code that made it.
At the end ``<run_dir>/report.md`` and ``paired.csv`` compare every arm with ``reference_arm`` on
``paired_endpoints`` over the interviews both scored (``medagent.history.evaluation.paired.arms_comparison``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from medagent.config import InterviewRunConfig
from medagent.config.legacy import upgrade_history_manifest
from medagent.history import history_mode
from medagent.history.agent.information import split_record
from medagent.history.evaluation.row import InterviewRow
from medagent.history.evaluation.scoring import KEY, endpoint_failed, score_run
from medagent.interview.sources import load_interviews
from medagent.interview.transcripts import Interview
from medagent.llm.endpoints import Endpoints
from medagent.run import RunDir, build_manifest, check_resume
from medagent.run.manifest import git_sha
from pipelines.common import (
    deploy,
    drain,
    finished_batches,
    log,
    ray_session,
    setup_logging,
)
from pipelines.interview_arms import RESUMABLE_KEYS, gold_kwargs, run_arms


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
    """Interview id -> the amq agent's transcript in ``agent.single_shot.transcript_run`` (single_shot,
    context=transcript_run); empty for every other config. Interviews the amq run did not finish (error or
    skipped rows) have no transcript."""
    if not history_mode(cfg.agent.mode).reads_context or cfg.agent.single_shot.context != "transcript_run":
        return {}
    if not cfg.agent.single_shot.transcript_run:
        raise ValueError(
            "agent.single_shot.context=transcript_run needs agent.single_shot.transcript_run=/abs/finished/amq/run_dir"
        )
    from medagent.history.agent.state import InterviewState

    rd = RunDir(Path(cfg.agent.single_shot.transcript_run), read_only=True)
    out = {}
    for d in rd.latest_records(rd.interviews, KEY, endpoint_failed):
        row = InterviewRow.from_dict(d)
        if row.result is None or not row.scored or not history_mode(row.result["mode"]).asks_questions:
            continue
        out[row.interview_id] = InterviewState.from_dict(row.result["final_state"]).transcript()
    if not out:
        raise ValueError(f"no finished amq interview in {cfg.agent.single_shot.transcript_run}")
    return out


def _interview_with_ray(cfg: InterviewRunConfig, todo: list[Interview], rd: RunDir) -> None:
    with ray_session(cfg.cluster):
        from actors.deploy import needs_for_interviews

        endpoints = deploy(needs_for_interviews(cfg))
        sha = git_sha()
        drain(
            stream_rows(cfg, todo, endpoints),
            lambda rows: rd.append_records(
                rd.interviews, [r | {"git_sha": sha} for r in rows], key=KEY, failed=endpoint_failed
            ),
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


def report(cfg: InterviewRunConfig, rd: RunDir, interviews: list[Interview]) -> dict[str, Any]:
    """Scores every row of the run and writes its report (``medagent.history.evaluation.scoring``)."""
    result, table = score_run(cfg, rd, interviews)
    print("\n" + table)
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
    previous = upgrade_history_manifest(rd.read_json(rd.manifest))  # run dirs of older versions resume too
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
                cfg.agent.single_shot.transcript_run,
                missing,
            )
        todo = [iv for iv in todo if iv.id in own]
    log.info(
        "%s: %d interviews, %d already run in %s, %d to go (agent=%s)",
        cfg.interviews.name, len(data.interviews), len(data.interviews) - len(todo), rd.root, len(todo),
        cfg.agent.mode,
    )  # fmt: skip
    if todo and cfg.report_only:
        log.warning("report_only: %d interviews not run; the report covers the %d already run",
                    len(todo), len(data.interviews) - len(todo))  # fmt: skip
    elif todo:
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
    if run_cfg.arms:
        run_arms(run_cfg)
    else:
        run(run_cfg)


if __name__ == "__main__":
    main()
