"""The console of a pipeline: ``setup_logging`` under hydra's handlers (a terminal stream and the run's log
file) keeps library chatter (faiss's loader, bm25s debug lines, Ray Data's operator status) out of the
terminal and in the log file, lets warnings and our own lines through, and prints the file's path once."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.common import RAY_LOGGERS, STATUS_LOGGERS, RunLogHandler, TerminalFilter, setup_logging

PROGRESS = "ray.data._internal.progress.logging_progress"  # where Ray Data logs status off a terminal


@pytest.fixture
def hydra_handlers(tmp_path: Path) -> Iterator[tuple[io.StringIO, Path]]:
    """The root logger as hydra's job_logging leaves it; every touched logger is restored afterwards."""
    import ray.data  # noqa: F401  (Ray's loggers get their own terminal handlers on import: saved as they are)

    names = ["", "bm25s", "faiss", *RAY_LOGGERS, *STATUS_LOGGERS]
    saved = {n: (logging.getLogger(n).handlers[:], logging.getLogger(n).level) for n in names}
    saved_logger_filters = {n: logging.getLogger(n).filters[:] for n in names}
    saved_filters = {n: [h.filters[:] for h in logging.getLogger(n).handlers] for n in names}
    terminal = io.StringIO()
    log_file = tmp_path / "run_benchmark.log"
    root = logging.getLogger()
    root.handlers = [logging.StreamHandler(terminal), logging.FileHandler(log_file)]
    root.setLevel(logging.INFO)
    yield terminal, log_file
    for n, (handlers, level) in saved.items():
        logger = logging.getLogger(n)
        for h in logger.handlers:
            if h not in handlers:
                h.close()
        logger.handlers = handlers
        logger.setLevel(level)
        logger.filters = saved_logger_filters[n]
        for h, filters in zip(handlers, saved_filters[n], strict=True):
            h.filters = filters


def test_chatter_goes_to_the_log_file_and_warnings_to_the_terminal(
    hydra_handlers: tuple[io.StringIO, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    terminal, log_file = hydra_handlers
    assert setup_logging() == str(log_file)
    setup_logging()  # a second call (run_suite's cells) neither prints again nor adds handlers twice
    assert capsys.readouterr().err.count(str(log_file)) == 1
    to_file = [h for h in logging.getLogger("ray").handlers if isinstance(h, RunLogHandler)]
    assert [h.baseFilename for h in to_file] == [str(log_file)]

    logging.getLogger("faiss.loader").info("Loading faiss with AVX512 support.")
    logging.getLogger("bm25s").debug("Building index from IDs")
    logging.getLogger(PROGRESS).info("Operator 0 MapBatches(AgentWorker): 12/40 rows")
    logging.getLogger("ray.serve").info("Deployed app 'medagent'")
    logging.getLogger("medagent").info("medqa: accuracy 0.62")
    logging.getLogger("faiss.loader").warning("index built for another dimension")
    for logger in (logging.getLogger(), *map(logging.getLogger, RAY_LOGGERS)):
        for h in logger.handlers:
            h.flush()

    shown = terminal.getvalue()
    assert "accuracy 0.62" in shown and "another dimension" in shown
    for chatter in ("AVX512", "Building index", "Operator 0", "Deployed app"):
        assert chatter not in shown
    written = log_file.read_text()
    for line in ("AVX512", "Building index", "Operator 0", "Deployed app", "accuracy 0.62"):
        assert line in written


def test_ray_data_status_never_reaches_rays_own_terminal_handler(
    hydra_handlers: tuple[io.StringIO, Path],
) -> None:
    setup_logging()
    ray_data = logging.getLogger("ray.data")
    terminals = [h for h in ray_data.handlers if type(h).__name__ == "PlainRayHandler"]  # Ray's own
    assert terminals and all(any(isinstance(f, TerminalFilter) for f in h.filters) for h in terminals)
    record = logging.LogRecord(PROGRESS, logging.INFO, __file__, 1, "status", None, None)
    assert not TerminalFilter().filter(record)
    record.levelno = logging.WARNING
    assert TerminalFilter().filter(record)


def test_ray_data_status_stays_off_the_terminal_after_ray_data_reconfigures_its_logging(
    hydra_handlers: tuple[io.StringIO, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from ray.data._internal.logging import configure_logging

    _, log_file = hydra_handlers
    setup_logging()
    configure_logging()  # what Ray Data does as each dataset starts: new handlers on ray.data, unfiltered
    capsys.readouterr()
    logging.getLogger(PROGRESS).info("Operator 1 MapBatches(EmbedWorker): 3/9 blocks")
    logging.getLogger(PROGRESS).warning("an operator is backpressured")
    logging.getLogger("ray.serve").info("Connecting to existing Serve app in namespace")
    for h in logging.getLogger("ray").handlers:
        h.flush()
    err = capsys.readouterr().err
    assert "3/9 blocks" not in err and "Connecting to existing" not in err and "backpressured" in err
    assert "3/9 blocks" in log_file.read_text()


def test_a_workers_log_line_is_written_once_when_a_library_configures_the_root_logger_later() -> None:
    """A Ray worker starts with no root handler; ``worker_logging`` gives our logger one. A library that
    calls ``logging.basicConfig`` afterwards in the same worker must not make every line appear twice."""
    from actors.common import worker_logging

    root = logging.getLogger()
    saved_root = root.handlers[:]
    logger = logging.getLogger("medagent.test_worker_logging")
    ours, theirs = io.StringIO(), io.StringIO()
    try:
        root.handlers = []
        worker_logging(logger)
        logger.handlers[0].setStream(ours)  # type: ignore[attr-defined]
        root.addHandler(logging.StreamHandler(theirs))  # what a later basicConfig does
        logger.info("interview RES0001: started")
    finally:
        root.handlers = saved_root
        logger.handlers = []
        logger.propagate = True
    assert ours.getvalue().count("interview RES0001: started") == 1
    assert theirs.getvalue() == ""
