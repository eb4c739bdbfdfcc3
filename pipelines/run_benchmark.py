"""Run an agent on a benchmark: ``python -m pipelines.run_benchmark benchmark=medqa agent=standalone limit=20``.

Ray Data shards the questions across ``AgentWorker`` actors that call the LLM deployment; predictions
stream into the run directory as they arrive, so a rerun with the same ``run_dir`` answers only what is
missing. Gold labels are written to the run dir and joined by id in ``medagent.eval.scoring`` only.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from medagent.config import RunConfig
from medagent.data import load_benchmark
from medagent.eval import format_table, score
from medagent.run import RunDir, build_manifest
from medagent.types import Prediction, Question
from pipelines.common import log, ray_session, register_configs, setup_logging


class ErrorBudgetExceeded(RuntimeError):
    """Too many questions failed: the run stops instead of producing a meaningless score."""


def deploy_llm(cfg: RunConfig) -> None:
    """Deploys the LLM application on the running Ray cluster (no-op for an external endpoint)."""
    from ray import serve

    from actors.builder import LLM_APP, LLM_ROUTE, build_llm_app, serve_http_options

    app = build_llm_app(cfg.llm, cfg.cluster)
    if app is None:
        return
    serve.start(http_options=serve_http_options(cfg.cluster))
    start = time.perf_counter()
    serve.run(app, name=LLM_APP, route_prefix=LLM_ROUTE)
    log.info(
        "LLM %s served in %.1fs at http://%s:%d%s",
        cfg.llm.name,
        time.perf_counter() - start,
        cfg.cluster.http_host,
        cfg.cluster.http_port,
        LLM_ROUTE,
    )


def stream_predictions(cfg: RunConfig, todo: list[Question]) -> Iterator[list[Prediction]]:
    """Shards ``todo`` over ``AgentWorker`` actors with Ray Data; yields predictions batch by batch."""
    import ray

    from actors.agent_worker import AgentWorker
    from actors.builder import agent_worker_map_kwargs, llm_endpoint

    ray.data.DataContext.get_current().enable_progress_bars = False  # our tqdm bar counts questions
    items = ray.data.from_items([{"id": q.id, "question": json.dumps(q.to_dict())} for q in todo])
    ds = items.map_batches(
        AgentWorker,
        fn_constructor_kwargs={
            "agent": asdict(cfg.agent),
            "llm": asdict(cfg.llm),
            "llm_endpoint": llm_endpoint(cfg.llm, cfg.cluster),
        },
        **agent_worker_map_kwargs(cfg.cluster),
    )
    for batch in ds.iter_batches(batch_size=None, batch_format="pandas"):
        yield [Prediction.from_dict(json.loads(s)) for s in batch["prediction"]]


def _answer_with_ray(cfg: RunConfig, todo: list[Question], rd: RunDir) -> None:
    with ray_session(cfg.cluster):
        deploy_llm(cfg)
        answered = errors = 0
        bar = tqdm(
            total=len(todo),
            desc=f"{cfg.benchmark.name}/{cfg.agent.mode}",
            unit="q",
            disable=not cfg.progress,
            file=sys.stderr,
        )
        with bar:
            for preds in stream_predictions(cfg, todo):
                rd.append_predictions(preds)
                answered += len(preds)
                errors += sum(p.error is not None for p in preds)
                bar.update(len(preds))
                bar.set_postfix(errors=errors)
                if answered >= cfg.error_budget_min_n and errors / answered > cfg.max_error_rate:
                    raise ErrorBudgetExceeded(
                        f"{errors} of {answered} questions failed (> max_error_rate={cfg.max_error_rate}); "
                        f"see the 'error' field in {rd.predictions}. Finished answers are kept: rerun "
                        f"with run_dir={rd.root} to resume once the cause is fixed."
                    )


def run(cfg: RunConfig) -> dict[str, Any]:
    """Runs one benchmark end to end and returns the metrics dict (also written to ``metrics.json``)."""
    data = load_benchmark(cfg.benchmark.loader, cfg.data_root, limit=cfg.limit, **cfg.benchmark.options)
    rd = RunDir.create(cfg.run_dir, cfg.outputs_root, f"{cfg.benchmark.name}-{cfg.agent.mode}")
    rd.write_golds(g for _, g in data.pairs)
    n_rejected = rd.write_rejected(data.rejected)
    if n_rejected:
        log.warning("%d malformed rows set aside in %s", n_rejected, rd.rejected)
    rd.write_json(rd.manifest, build_manifest(asdict(cfg), data.files, rd.read_json(rd.manifest)))

    done = rd.completed_ids()
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
        _answer_with_ray(cfg, todo, rd)

    metrics = score(
        rd.load_predictions(),
        rd.load_golds(),
        benchmark=cfg.benchmark.name,
        rejected=n_rejected,
        bootstrap_samples=cfg.bootstrap_samples,
        seed=cfg.seed,
    )
    result = {**metrics.to_dict(), "run_dir": str(rd.root), "llm": cfg.llm.name, "agent": cfg.agent.mode}
    rd.write_json(rd.metrics, result)
    print("\n" + format_table([metrics]))
    print(f"\nrun directory: {rd.root}")
    return result


register_configs()


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    setup_logging()
    run_cfg: RunConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    if run_cfg.run_dir and not Path(run_cfg.run_dir).is_absolute():
        run_cfg.run_dir = str(Path(run_cfg.run_dir).resolve())
    run(run_cfg)


if __name__ == "__main__":
    main()
