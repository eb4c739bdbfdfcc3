"""Shared driver-side helpers for the hydra entry points: config registration, logging, Ray lifecycle."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore

from actors.apps import ServeApp
from actors.builder import ray_init_kwargs
from actors.deploy import Needs, check_index, endpoints, serving_apps
from actors.placement import check_placement
from medagent.config import ClusterConfig, LLMConfig, OpenScoringConfig, RunConfig, ServeConfig
from medagent.llm.endpoints import Endpoints

log = logging.getLogger("medagent")

T = TypeVar("T")


class UsageError(Exception):
    """A mistake in a command line or the files it names (no questions, a missing file, a run_dir that
    cannot be written): ``usage_errors`` prints it as one line and exits 2, without a traceback."""


@contextlib.contextmanager
def usage_errors() -> Iterator[None]:
    """Turns a ``UsageError`` raised inside into one line on stderr and exit status 2; our own bugs (any
    other exception) still raise with their traceback."""
    try:
        yield
    except UsageError as exc:
        import sys

        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


class ErrorBudgetExceeded(RuntimeError):
    """Too many items failed: the run stops instead of producing a meaningless score."""


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """``kill PID`` (SIGTERM) pauses a run the way Ctrl-C does, and so does ``kill -INT`` of a run started in
    the background by a script (such a job starts with SIGINT ignored, and Python then has no handler for
    it): both raise ``KeyboardInterrupt`` in the main thread while inside, so ``drain`` keeps what is written
    and says how to resume. Outside the main thread it changes nothing."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, _interrupt)
    if previous[signal.SIGINT] is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def drain(
    batches: Iterable[Sequence[T]],
    write: Callable[[Sequence[T]], object],
    *,
    failed: Callable[[T], bool],
    total: int,
    desc: str,
    unit: str,
    progress: bool,
    min_n: int,
    max_error_rate: float,
    budget_message: Callable[[int, int], str],
) -> tuple[int, int]:
    """Writes each batch of a Ray Data stream as it arrives, with a progress bar and an error budget.

    Every pipeline streams results the same way: written first (so a stop keeps them), then counted;
    once ``min_n`` items are done, a failed share above ``max_error_rate`` raises ``ErrorBudgetExceeded``
    with ``budget_message(failed, done)``. Returns (done, failed).
    """
    import sys

    from tqdm import tqdm

    done = n_failed = 0
    with (
        tqdm(total=total, desc=desc, unit=unit, disable=not progress, file=sys.stderr) as bar,
        stop_signals(),
    ):
        try:
            for batch in batches:
                write(batch)
                done += len(batch)
                n_failed += sum(failed(x) for x in batch)
                bar.update(len(batch))
                bar.set_postfix(errors=n_failed)
                if done >= min_n and n_failed / done > max_error_rate:
                    raise ErrorBudgetExceeded(budget_message(n_failed, done))
        except KeyboardInterrupt:
            # Ctrl-C is how a long CPU run is paused: say what is kept instead of Ray Data's thread traceback.
            # SystemExit still unwinds the callers' context managers (Ray shutdown).
            bar.close()
            print(
                f"\ninterrupted: {done} of {total} {unit}s finished this run and are written; "
                "rerun the same command to resume",
                file=sys.stderr,
            )
            raise SystemExit(130) from None
    return done, n_failed


def finished_batches(ds: Any, batch_format: str, *, llm_bound: bool = False) -> Iterator[Any]:
    """Each output block of ``ds`` as soon as it is finished, for loops that persist results one by one.

    Ray Data's default ``prefetch_batches=1`` makes the iterator wait for block k+1 before it yields block k:
    with minutes per block (an interview, a question, an embedded shard), every finished result sat in the
    iterator until the next one was done, and an interrupted run lost it.

    ``llm_bound``: the blocks are model conversations. Ray Data fails a dataset in which no block finished
    for 30 minutes (``execution_no_progress_timeout_s``); a CPU interview on a loaded machine took longer,
    and the run died with the interviews in flight. Every model call is bounded by ``llm.request_timeout_s``
    and its retries, so a stuck call already ends as the row's endpoint error: the guard is turned off.
    """
    if llm_bound:
        ds.context.execution_no_progress_timeout_s = -1
    yield from ds.iter_batches(batch_size=None, batch_format=batch_format, prefetch_batches=0)


def register_configs() -> None:
    """Registers the typed schema that ``conf/config.yaml`` lists first in its defaults."""
    ConfigStore.instance().store(name="run_schema", node=RunConfig)
    # conf/serve.yaml's schema, registered here so the RayService builders (pipelines.serve_app) compose
    # it without importing the serve pipeline.
    ConfigStore.instance().store(name="serve_schema", node=ServeConfig)


# Loggers whose info and debug lines are chatter on a terminal (faiss's loader attempts, bm25s, Ray, Ray
# Data's operator status every few seconds when stdout is not a terminal): the run's log file keeps them.
CHATTY = ("faiss", "bm25s", "ray", "httpx", "urllib3", "filelock")
# Ray's loggers carry their own terminal handlers and do not propagate to the root logger.
RAY_LOGGERS = ("ray", "ray.data", "ray.serve")


class TerminalFilter(logging.Filter):
    """Lets warnings through, and everything from loggers not in ``CHATTY``."""

    def filter(self, record: logging.LogRecord) -> bool:
        chatty = any(record.name == n or record.name.startswith(n + ".") for n in CHATTY)
        return record.levelno >= logging.WARNING or not chatty


class RunLogHandler(logging.FileHandler):
    """The run's log file, added to Ray's loggers (which do not propagate to hydra's handler)."""


# Ray's loggers (Serve, the worker, Ray Data) that report status at info level. Ray Data re-runs its own logging setup whenever a
# dataset starts (``ray.data._internal.logging.configure_logging``) and Serve its own when it starts, which
# replaces their handlers and with them any terminal filter; a filter on the emitting logger survives that.
STATUS_LOGGERS = (
    "ray.serve",
    "ray._private.worker",
    "ray.data._internal.progress",
    "ray.data._internal.progress.logging_progress",
    "ray.data._internal.execution.streaming_executor",
    "ray.data._internal.logging",
)


class ToRunLog(logging.Filter):
    """On an emitting logger: lines below warning go to the run's log file only (or nowhere without one)."""

    def __init__(self, to_file: logging.Handler | None) -> None:
        super().__init__()
        self.to_file = to_file

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        if self.to_file is not None and record.levelno >= self.to_file.level:
            self.to_file.handle(record)
        return False


def _filter_terminal(logger: logging.Logger) -> None:
    for h in logger.handlers:
        is_file = isinstance(h, logging.FileHandler) or type(h).__name__ == "SessionFileHandler"
        if not is_file and not any(isinstance(f, TerminalFilter) for f in h.filters):
            h.addFilter(TerminalFilter())


def setup_logging(level: int = logging.INFO) -> str | None:
    """The terminal keeps progress bars, warnings and results; ``CHATTY`` loggers' lines go to the run's
    log file only (hydra's file handler on the root logger), whose path is printed once. Returns it."""
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger()
    _filter_terminal(root)
    logging.getLogger("bm25s").setLevel(logging.DEBUG)
    files = [h for h in root.handlers if isinstance(h, logging.FileHandler)]
    path = files[0].baseFilename if files else None
    for name in RAY_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        _filter_terminal(logger)
        for h in [h for h in logger.handlers if isinstance(h, RunLogHandler) and h.baseFilename != path]:
            logger.removeHandler(h)  # an earlier run's log in this process (tests, suites of hydra jobs)
            h.close()
        if path and not any(isinstance(h, RunLogHandler) for h in logger.handlers):
            to_file = RunLogHandler(path, encoding="utf-8")
            to_file.setFormatter(files[0].formatter)
            logger.addHandler(to_file)
    to_run_log = next((h for h in logging.getLogger("ray").handlers if isinstance(h, RunLogHandler)), None)
    for name in STATUS_LOGGERS:
        logger = logging.getLogger(name)
        for f in [f for f in logger.filters if isinstance(f, ToRunLog)]:
            logger.removeFilter(f)
        logger.addFilter(ToRunLog(to_run_log))
    if path and getattr(setup_logging, "shown", None) != path:
        setup_logging.shown = path  # type: ignore[attr-defined]
        print(
            f"log: {path} (library chatter and Ray Data status are written there)",
            file=sys.stderr,
            flush=True,
        )
    return path


@contextlib.contextmanager
def ray_session(cluster: ClusterConfig) -> Iterator[Any]:
    """Starts (or joins) Ray for the duration of a pipeline; leaves an already running session alone."""
    kwargs = ray_init_kwargs(cluster)  # sets loopback env vars before ray is imported
    import ray

    from actors.private_apis import ray_joins_loopback_cluster_unsafely

    if cluster.ray.loopback_only and cluster.ray.address and ray_joins_loopback_cluster_unsafely():
        # Ray was imported before actors.builder.ray_env ran: joining a cluster that listens on loopback, it
        # would dial the machine's network address and wait forever. (A new local cluster merely listens
        # on that address.)
        raise RuntimeError(
            "ray was imported before actors.builder.ray_env(cluster) set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0; "
            "call ray_env first in this pipeline"
        )

    started = False
    if not ray.is_initialized():
        os.environ.setdefault("RAY_DEDUP_LOGS", "1")
        ray.init(**kwargs)
        started = True
        log.info("Ray started: %s", ray.cluster_resources())
    try:
        yield ray
    finally:
        if started:
            with contextlib.suppress(Exception):
                _end_serve(cluster)
            ray.shutdown()


def _end_serve(cluster: ClusterConfig) -> None:
    """Shuts Serve down at the end of a pipeline's Ray session; with ``cluster.llm.keep_app`` on a joined cluster,
    deletes every application but the LLM's, which the next pipeline reuses (``run_llm_app``)."""
    from ray import serve

    from actors.builder import LLM_APP

    if not (cluster.llm.keep_app and cluster.ray.address):
        serve.shutdown()
        return
    for name in list(serve.status().applications):
        if name != LLM_APP:
            serve.delete(name)


def run_apps(apps: Sequence[ServeApp]) -> Any:
    """``serve.run`` each application of ``actors.apps.build_serving_apps`` in order (the retrieval
    application before the main one, whose deployments hold handles to it); returns the last one's handle."""
    from ray import serve

    handle = None
    for a in apps:
        handle = serve.run(a.app, name=a.name, route_prefix=a.route_prefix)
    return handle


def scoring_session(
    scoring: OpenScoringConfig, cluster: ClusterConfig
) -> contextlib.AbstractContextManager[Any]:
    """What open-ended scoring runs inside: a Ray session (joined, or a no-op inside a pipeline's own) when
    the models go to a GPU node (``actors.scoring.open_scorer``), else nothing."""
    return ray_session(cluster) if scoring.num_gpus > 0 else contextlib.nullcontext()


# Where the running LLM application's config fingerprint is kept (Ray's internal KV, cluster-wide:
# ``actors.private_apis.kv_get`` says why no public API does).
_LLM_APP_KEY = b"medagent/llm_app_fingerprint"


# LLMConfig fields that only the callers read (transport, retries, how turns call tools): changing them
# does not change what is served, so a running application stays in use.
_CLIENT_KEYS = frozenset(
    {
        "base_url",
        "api_key_env",
        "request_timeout_s",
        "max_retries",
        "tool_calls",
        "tool_choice",
        "supports_json_schema",
    }
)


def _llm_fingerprint(llm: LLMConfig, cluster: ClusterConfig) -> bytes:
    import hashlib
    import json
    from dataclasses import asdict

    served = {k: v for k, v in asdict(llm).items() if k not in _CLIENT_KEYS}
    blob = json.dumps({"llm": served, "cluster": asdict(cluster)}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest().encode()


def run_llm_app(llm: LLMConfig, cluster: ClusterConfig) -> bool:
    """Serves ``llm`` alone as the LLM application (``actors.builder.LLM_APP``); returns False when there is
    nothing to serve (an external endpoint).

    An LLM application already RUNNING from the same LLM and cluster config is kept: ``serve.run`` gives
    every deployment a new random version, so running it again would restart the engine (minutes for a
    large model) between pipelines that share a cluster, or between the cells of a suite.
    """
    from ray import serve

    from actors.backends import build_llm_app
    from actors.builder import LLM_APP, LLM_ROUTE, serve_start_kwargs
    from actors.private_apis import kv_get, kv_put

    app = build_llm_app(llm, cluster)
    if app is None:
        return False
    serve.start(**serve_start_kwargs(cluster))
    fingerprint = _llm_fingerprint(llm, cluster)
    status = serve.status().applications.get(LLM_APP)
    if status is not None and status.status == "RUNNING" and kv_get(_LLM_APP_KEY) == fingerprint:
        log.info("LLM %s: reusing the running application %s", llm.name, LLM_APP)
        return True
    start = time.perf_counter()
    serve.run(app, name=LLM_APP, route_prefix=LLM_ROUTE)
    kv_put(_LLM_APP_KEY, fingerprint)
    log.info(
        "LLM %s served in %.1fs at http://%s:%d%s",
        llm.name, time.perf_counter() - start, cluster.serve.http_host, cluster.serve.http_port, LLM_ROUTE,
    )  # fmt: skip
    return True


def deploy(needs: Needs) -> Endpoints:
    """Deploys what a run needs (``actors.deploy.Needs``) on the running Ray cluster; returns how its
    workers reach it. The one deploy path of every pipeline.

    The LLM gets its own application (``run_llm_app``: llama.cpp or vLLM; nothing for an external
    endpoint), kept when one from the same config runs; a searching run adds the retriever's application
    and the main one (ingress, reranker), which reach each other by handle; workers call them by handle too.
    """
    check_index(needs)
    check_placement(needs)
    if needs.llm_app:
        run_llm_app(needs.llm, needs.cluster)
    apps = serving_apps(needs)
    if apps:
        from ray import serve

        from actors.builder import serve_start_kwargs

        serve.start(**serve_start_kwargs(needs.cluster))
        start = time.perf_counter()
        run_apps(apps)
        log.info(
            "serving apps up in %.1fs at http://%s:%d (LLM %s, retriever %s, reranker %s, index %s)",
            time.perf_counter() - start,
            needs.cluster.serve.http_host,
            needs.cluster.serve.http_port,
            needs.llm.name,
            needs.retriever.name if needs.retriever else None,
            needs.reranker.name if needs.reranker else None,
            needs.index_dir,
        )
    return endpoints(needs)
