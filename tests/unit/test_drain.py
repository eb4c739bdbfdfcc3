"""The one streaming loop of the pipelines: write first, then count, then check the error budget."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pipelines.common import ErrorBudgetExceeded, drain


def _drain(
    batches: list[list[int]], written: list[int], *, min_n: int = 2, rate: float = 0.5
) -> tuple[int, int]:
    return drain(
        batches,
        written.extend,
        failed=lambda x: x < 0,
        total=sum(map(len, batches)),
        desc="t",
        unit="x",
        progress=False,
        min_n=min_n,
        max_error_rate=rate,
        budget_message=lambda failed, done: f"{failed} of {done} failed",
    )


def test_counts_every_item_and_writes_all() -> None:
    written: list[int] = []
    assert _drain([[1, -1], [2], [3, 4]], written) == (5, 1)
    assert written == [1, -1, 2, 3, 4]


def test_budget_stops_after_writing_the_batch_that_broke_it() -> None:
    written: list[int] = []
    with pytest.raises(ErrorBudgetExceeded, match="2 of 3 failed"):
        _drain([[1], [-1, -2], [5]], written)
    assert written == [1, -1, -2]  # finished items are kept; the batch after the stop is never read


def test_no_stop_before_min_n() -> None:
    written: list[int] = []
    assert _drain([[-1], [2], [3]], written, min_n=5) == (3, 1)


def test_ctrl_c_keeps_what_was_written_and_says_how_to_resume(capsys: pytest.CaptureFixture[str]) -> None:
    def stream() -> Iterator[list[int]]:
        yield [1, 2]
        raise KeyboardInterrupt

    written: list[int] = []
    with pytest.raises(SystemExit) as stop:
        drain(
            stream(),
            written.extend,
            failed=lambda x: x < 0,
            total=5,
            desc="t",
            unit="interview",
            progress=False,
            min_n=2,
            max_error_rate=0.5,
            budget_message=lambda failed, done: "",
        )
    assert stop.value.code == 130 and written == [1, 2]
    err = capsys.readouterr().err
    assert "2 of 5 interviews finished" in err and "rerun the same command" in err


_SLOW_RUN = """
import sys, time
from pipelines.common import drain

def stream():
    for i in range(1000):
        if i == 1:
            print("ready", flush=True)
        time.sleep(0.05)
        yield [i]

drain(stream(), lambda b: None, failed=lambda x: False, total=1000, desc="t", unit="pair", progress=False,
      min_n=1, max_error_rate=1.0, budget_message=lambda f, d: "")
"""


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT ignored at start"])
def test_kill_or_an_ignored_ctrl_c_pauses_a_background_run_like_ctrl_c(how: str) -> None:
    """``kill PID`` and ``kill -INT`` of a job a script started in the background (SIGINT ignored) stop the
    run through the same path as Ctrl-C: exit 130 with the resume message."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    ignore = how.startswith("SIGINT")
    child = subprocess.Popen(
        [sys.executable, "-c", _SLOW_RUN],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore else None,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGINT if ignore else signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err[-2000:]
    assert "interrupted:" in err and "rerun the same command" in err
