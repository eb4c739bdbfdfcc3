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
