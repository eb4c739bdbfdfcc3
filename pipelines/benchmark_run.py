"""One benchmark run, end to end: the run that ``pipelines.run_benchmark`` starts from the command line and
that ``pipelines.run_suite`` drives cell by cell in its own Ray session (shared run code, not an entry point).

Ray Data shards the questions across ``AgentWorker`` actors that call the LLM deployment; predictions
stream into the run directory as they arrive, so a rerun with the same ``run_dir`` answers only what is
missing. Gold labels are written to the run dir and joined by id in ``medagent.eval.scoring`` only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from medagent.config import RunConfig
from medagent.config.legacy import upgrade_manifest
from medagent.data import load_benchmark
from medagent.eval import format_table, score
from medagent.llm.endpoints import Endpoints
from medagent.retrieval.holdout import evidence_articles
from medagent.run import RunDir, build_manifest, check_resume
from medagent.types import Prediction, Question
from pipelines.common import (
    UsageError,
    deploy,
    drain,
    finished_batches,
    log,
    ray_session,
    scoring_session,
)

# Config keys that may differ when a run dir is resumed (``medagent.run.drift`` patterns); any other
# difference from the config in the run dir's manifest refuses the resume (``RunConfig.resume_check``).
# They choose where and how fast the run goes, how much of it, or how it is scored (recomputed over every
# answer at the end of each invocation), never what one question's answer is. The seed is not here.
RESUMABLE_KEYS = frozenset(
    {
        "limit", "progress", "show_example", "kill_worker_once_file", "resume_check",
        "cluster",  # a resume on another cluster is fine
        # Path spellings differ between machines (data files are checksummed in the manifest; the index by
        # its manifest's checksum, ``index_fingerprint``, which is not resumable).
        "run_dir", "outputs_root", "data_root", "index_dir", "*.local_path",
        "max_error_rate", "error_budget_min_n",  # raised to get past a failure: the budget message says so
        "bootstrap_samples", "open_scoring",  # scoring only
        # Transport and hardware knobs of the same models.
        "llm.request_timeout_s", "llm.max_retries", "llm.api_key_env", "llm.n_threads",
        "llm.tensor_parallel_size", "llm.pipeline_parallel_size", "agent.max_concurrency",
        "retriever.use_gpu", "retriever.max_batch_size", "retriever.batch_wait_timeout_s",
        "reranker.device", "reranker.batch_size",
    }
)  # fmt: skip


def uses_retrieval(cfg: RunConfig) -> bool:
    """Whether the run's agent searches: its mode says so when it registers (``medagent.agent``)."""
    from medagent.agent import needs_retrieval

    return needs_retrieval(cfg.agent)


def run_config(cfg: RunConfig) -> dict[str, Any]:
    """The config as the run's manifest records it and as a resume is checked against (JSON, so both sides
    compare alike). A searching run adds its index's fingerprint (``index_fingerprint``: the checksum of
    ``index_dir/manifest.json``): ``index_dir`` is a path whose spelling may change between machines
    (``RESUMABLE_KEYS``), the index it names may not."""
    from medagent.retrieval.fingerprint import index_fingerprint

    config: dict[str, Any] = json.loads(json.dumps(asdict(cfg), default=str))
    if uses_retrieval(cfg):
        config["index_fingerprint"] = index_fingerprint(cfg.index_dir)
    return config


def run_departures(cfg: RunConfig, config: dict[str, Any]) -> list[str]:
    """Where this run departs from the QA paper's method (``medagent.config.recipe.departures``), its index's
    embedder and sources included when it searches."""
    from medagent.config.recipe import departures
    from medagent.retrieval.layout import IndexLayout

    index = None
    if uses_retrieval(cfg) and cfg.index_dir:
        path = IndexLayout(cfg.index_dir).manifest
        index = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    return departures(config, index)


def worker_rows(todo: list[Question], open_ended: bool) -> list[dict[str, str]]:
    """The rows Ray Data ships to the agent workers: questions only (golds stay in the driver), and in an
    open-ended run without their options (defence in depth: the agents ignore them too)."""
    shipped = [replace(q, options=None) if open_ended else q for q in todo]
    return [{"id": q.id, "question": json.dumps(q.to_dict())} for q in shipped]


def stream_predictions(
    cfg: RunConfig,
    todo: list[Question],
    endpoints: Endpoints,
) -> Iterator[list[Prediction]]:
    """Shards ``todo`` over ``AgentWorker`` actors with Ray Data; yields predictions batch by batch."""
    import ray

    from actors.agent_worker import AgentWorker
    from actors.builder import agent_worker_map_kwargs

    ray.data.DataContext.get_current().enable_progress_bars = False  # our tqdm bar counts questions
    items = ray.data.from_items(worker_rows(todo, open_ended=cfg.agent.open_ended))
    ds = items.map_batches(
        AgentWorker,
        fn_constructor_kwargs={
            "agent": asdict(cfg.agent),
            "llm": asdict(cfg.llm),
            "llm_endpoint": endpoints.llm,
            "services_endpoint": endpoints.services,
            "kill_once_file": cfg.kill_worker_once_file,
        },
        **agent_worker_map_kwargs(cfg.cluster, cfg.agent.max_concurrency),
    )
    for batch in finished_batches(ds, "pandas", llm_bound=True):
        yield [Prediction.from_dict(json.loads(s)) for s in batch["prediction"]]


def _answer_with_ray(
    cfg: RunConfig, todo: list[Question], rd: RunDir, endpoints: Endpoints | None = None
) -> None:
    with ray_session(cfg.cluster):  # a no-op inside run_suite's session
        from actors.deploy import needs_for_benchmark

        live = endpoints or deploy(needs_for_benchmark(cfg))
        from actors.metrics import RunMeter

        # Questions by outcome and accuracy so far, for Prometheus; golds stay here in the driver.
        meter = RunMeter.for_run(rd, cfg.benchmark.name, cfg.agent.mode)

        def write(preds: Sequence[Prediction]) -> None:
            rd.append_predictions(list(preds))
            meter.add(list(preds))

        drain(
            stream_predictions(cfg, todo, live),
            write,
            failed=lambda p: p.error is not None,
            total=len(todo),
            desc=f"{cfg.benchmark.name}/{cfg.agent.mode}",
            unit="q",
            progress=cfg.progress,
            min_n=cfg.error_budget_min_n,
            max_error_rate=cfg.max_error_rate,
            budget_message=lambda failed, done: (
                f"{failed} of {done} questions failed (> max_error_rate={cfg.max_error_rate}); "
                f"see the 'error' field in {rd.predictions}. Finished answers are kept: rerun "
                f"with run_dir={rd.root} to resume once the cause is fixed."
            ),
        )


def run(cfg: RunConfig, endpoints: Endpoints | None = None) -> dict[str, Any]:
    """Runs one benchmark end to end and returns the metrics dict (also written to ``metrics.json``).

    Args:
        cfg: The run, with absolute paths (``absolute_paths``).
        endpoints: A live deployment to use (``run_suite`` deploys once for all its cells); None deploys
            what ``cfg`` needs when there is anything to answer.

    Raises:
        ConfigDriftError: ``run_dir`` holds answers made under other settings (``RESUMABLE_KEYS`` aside).
        UsageError: No valid question, a missing input file, or a ``run_dir`` that cannot be written;
            raised before anything is written, so a refused run leaves no directory behind.
    """
    try:
        data = load_benchmark(cfg.benchmark.loader, cfg.data_root, limit=cfg.limit, **cfg.benchmark.options)
    except FileNotFoundError as exc:
        raise UsageError(f"no such file: {exc.filename}" if exc.filename else str(exc)) from None
    if not data.pairs:
        why = f"; first: {data.rejected[0].reason}" if data.rejected else ""
        raise UsageError(
            f"no questions: {cfg.benchmark.name} has no valid question "
            f"({len(data.rejected)} malformed rows{why}; limit={cfg.limit})"
        )
    if cfg.agent.retrieval.hold_out_own_evidence:
        bare = [q.id for q, _ in data.pairs if not evidence_articles(q)]
        if bare:
            raise UsageError(
                f"agent.retrieval.hold_out_own_evidence: {len(bare)} of {len(data.pairs)} questions of "
                f"{cfg.benchmark.name} name no source article to hold out (first: {bare[0]}); only PubMedQA "
                "and BioASQ rows do"
            )
    check_writable(cfg.run_dir)
    try:
        rd = RunDir.create(cfg.run_dir, cfg.outputs_root, f"{cfg.benchmark.name}-{cfg.agent.mode}")
    except PermissionError as exc:
        raise UsageError(f"cannot write the run directory: {exc.filename or exc}") from None
    done = rd.completed_ids()
    previous = upgrade_manifest(rd.read_json(rd.manifest))  # run dirs of older versions resume too
    config = run_config(cfg)  # checked before anything is written
    if cfg.resume_check:
        check_resume(previous, config, RESUMABLE_KEYS, run_dir=str(rd.root), answered=len(done))
    rd.write_golds(g for _, g in data.pairs)
    rd.write_questions(q for q, _ in data.pairs)
    n_rejected = rd.write_rejected(data.rejected)
    if n_rejected:
        log.warning("%d malformed rows set aside in %s", n_rejected, rd.rejected)
    departures = run_departures(cfg, config)
    rd.write_json(rd.manifest, build_manifest(config, data.files, previous, departures))
    log.info("departures from the QA paper's method: %s", "; ".join(departures) or "none")

    searched = None
    if uses_retrieval(cfg):
        from medagent.retrieval.fingerprint import describe_search

        # Which sources the agent searches and how big each is: an index whose source was all rejected
        # (the demo's MedQuAD once) is visible here, not only in the quality of the cited evidence.
        searched = describe_search(config["index_fingerprint"], cfg.agent.retrieval.sources)
        log.info("index %s: searching %s", cfg.index_dir, searched)
    todo = [q for q, _ in data.pairs if q.id not in done]
    log.info(
        "%s: %d questions, %d already answered in %s, %d to go",
        cfg.benchmark.name,
        len(data.pairs),
        len(data.pairs) - len(todo),
        rd.root,
        len(todo),
    )
    if todo:
        _answer_with_ray(cfg, todo, rd, endpoints)

    metrics = score(
        rd.load_predictions(),
        rd.load_golds(),
        benchmark=cfg.benchmark.name,
        rejected=n_rejected,
        bootstrap_samples=cfg.bootstrap_samples,
        seed=cfg.seed,
    )
    result = {**metrics.to_dict(), "run_dir": str(rd.root), "llm": cfg.llm.name, "agent": cfg.agent.mode}
    if cfg.agent.open_ended:
        result["open_ended"] = _score_open_ended(cfg, rd)
        print(_format_open_ended(result["open_ended"]))
    if searched is not None:
        result["index"] = {"dir": cfg.index_dir, "searched": searched}
    gate_view = _gate_summary(cfg, rd, result)
    rd.write_json(rd.metrics, result)
    print("\n" + format_table([metrics]))
    if gate_view:
        print("\n" + gate_view)
    if searched is not None:
        print(f"\nsearched {cfg.index_dir}: {searched}")
    if cfg.show_example:
        _print_example(rd, data.pairs)
    print(f"\nrun directory: {rd.root}")
    return result


def _score_open_ended(cfg: RunConfig, rd: RunDir) -> dict[str, Any]:
    """Free-text answers: embedding cosine and BERTScore F1 against the gold answer text, scored where
    ``open_scoring`` places the models: an actor on a GPU node (its node recorded as ``placement``), or here.
    """
    from actors.scoring import RemoteScorer, open_scorer
    from medagent.eval import score_open_ended

    with scoring_session(cfg.open_scoring, cfg.cluster):
        scorer = open_scorer(cfg.open_scoring)
        try:
            summary = score_open_ended(
                rd.load_predictions(),
                rd.load_golds(),
                scorer=scorer,
                bootstrap_samples=cfg.bootstrap_samples,
                seed=cfg.seed,
            )
            if isinstance(scorer, RemoteScorer):
                summary["placement"] = scorer.where()
        finally:
            if isinstance(scorer, RemoteScorer):
                scorer.close()  # frees its GPU for the next cell of a suite
    return summary


def _gate_summary(cfg: RunConfig, rd: RunDir, result: dict[str, Any]) -> str | None:
    """A gated run: standalone, full and gated answers side by side, and the arms' accuracy and cost at the
    run's threshold (into ``result["gate"]``); the report derives every other threshold."""
    if cfg.agent.mode != "gated" or cfg.agent.open_ended:
        return None
    from medagent.report.gate import side_by_side, sweep

    preds, golds = rd.load_predictions(with_traces=True), rd.load_golds()
    threshold = cfg.agent.gate.threshold
    result["gate"] = sweep(preds, golds, [threshold], bootstrap_samples=cfg.bootstrap_samples, seed=cfg.seed)
    return side_by_side(preds, golds, threshold)


def _format_open_ended(summary: dict[str, Any]) -> str:
    lines = [f"\nopen-ended answers: n={summary.get('n')}, invalid={summary.get('invalid')}, "
             f"errors={summary.get('errors')}"]  # fmt: skip
    for name, m in summary.get("metrics", {}).items():
        lo, hi = m.get("ci95", (float("nan"), float("nan")))
        lines.append(f"  {name:<28} {m.get('mean', float('nan')):.3f}  95% CI [{lo:.3f}, {hi:.3f}]")
    return "\n".join(lines)


def _print_example(rd: RunDir, pairs: list[tuple[Question, Any]]) -> None:
    """One answered question with its trace and cited evidence (the first that cites any, else the first)."""
    from medagent.run.trace_view import format_example

    preds = {p.id: p for p in rd.load_predictions(with_traces=True)}
    answered = [(q, g) for q, g in pairs if q.id in preds]
    if not answered:
        return
    q, g = next(((q, g) for q, g in answered if preds[q.id].evidence), answered[0])
    print(
        "\nexample (traces of every question: "
        + str(rd.traces_dir)
        + ")\n"
        + format_example(q, preds[q.id], g)
    )


def check_writable(run_dir: str | None) -> None:
    """Raises ``UsageError`` for a ``run_dir`` that is a file, or whose nearest existing folder cannot be
    written."""
    if not run_dir:
        return
    path = Path(run_dir)
    if path.exists() and not path.is_dir():
        raise UsageError(f"run_dir={run_dir} is a file, not a directory")
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"run_dir={run_dir}: {existing} is not writable")


def absolute_paths(cfg: RunConfig) -> RunConfig:
    """Resolves ``run_dir`` and ``index_dir`` in place: actors run in other working directories."""
    if cfg.run_dir and not Path(cfg.run_dir).is_absolute():
        cfg.run_dir = str(Path(cfg.run_dir).resolve())
    if cfg.index_dir and not Path(cfg.index_dir).is_absolute():
        cfg.index_dir = str(Path(cfg.index_dir).resolve())
    return cfg
