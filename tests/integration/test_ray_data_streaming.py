"""How our long-running Ray Data maps stream: concurrency per actor, and delivery as soon as a row is done.

* InterviewWorker's pool runs ``agent.max_concurrency`` interviews at once on one actor. A batch is one
  interview, and a Ray Data map actor takes one task at a time unless told otherwise: the async worker's
  own semaphore then never had a second interview to admit. Counted inside the callable (no clocks).
* ``pipelines.common.finished_batches`` hands the driver each row before the next one is finished (Ray
  Data's default prefetch held every finished row until the next was done, so an interrupted run lost it).
  Each row waits, within a bound, until the driver holds every row finished before it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from actors.builder import interview_worker_map_kwargs
from pipelines.common import finished_batches
from tests.configs import cluster_config


class _Counting:
    """Stands in for InterviewWorker: an async ``__call__`` that waits until enough calls are inside."""

    def __init__(self, limit: int) -> None:
        self.sem = asyncio.Semaphore(limit)
        self.inside = 0
        self.most = 0

    async def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        async with self.sem:
            self.inside += 1
            self.most = max(self.most, self.inside)
            for _ in range(200):  # hold the slot until another call joins, or give up after ~2 s
                if self.inside > 1:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            self.inside -= 1
            return {"id": batch["id"], "most": [self.most] * len(batch["id"])}


@pytest.mark.parametrize("concurrency", [1, 2])
def test_the_pool_admits_max_concurrency_interviews(ray_cluster: Any, concurrency: int) -> None:
    cluster = cluster_config(num_workers=1, worker_num_cpus=0.25)
    ds = ray_cluster.data.from_items([{"id": i} for i in range(6)]).map_batches(
        _Counting,
        fn_constructor_kwargs={"limit": concurrency},
        **interview_worker_map_kwargs(cluster, concurrency),
    )
    rows = ds.take_all()
    assert sorted(r["id"] for r in rows) == list(range(6))
    assert max(r["most"] for r in rows) == concurrency


class _Seen:
    """Which rows the map actor has finished, in order, and which the driver holds (an actor both sides reach)."""

    def __init__(self) -> None:
        self.finished: list[int] = []
        self.held: set[int] = set()

    def finish(self, i: int) -> None:
        self.finished.append(i)

    def finished_so_far(self) -> list[int]:
        return list(self.finished)

    def hold(self, i: int) -> None:
        self.held.add(i)

    def holds_all(self, ids: list[int]) -> bool:
        return self.held.issuperset(ids)


# How long a row waits for the driver to hold the rows finished before it. A row the iterator holds back is
# held until the next one is done, so any bound finds it; the bound is wide because on a loaded machine Ray
# Data's scheduling loop can take tens of seconds to hand a finished row on. A regression costs this once.
_WAIT_FOR_DRIVER_S = 180.0


class _WaitsForTheDriver:
    """A row finishes only once the driver holds every row this actor finished before it started, or gives up
    after ``_WAIT_FOR_DRIVER_S`` and says so. Ray Data dispatches queued rows by locality, not by index, so
    "the row before" is the one finished before, not ``i - 1``."""

    def __init__(self, seen: Any) -> None:
        self.seen = seen

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import ray

        i = int(batch["id"][0])
        before = ray.get(self.seen.finished_so_far.remote())
        deadline = time.monotonic() + _WAIT_FOR_DRIVER_S
        delivered = ray.get(self.seen.holds_all.remote(before))
        while not delivered and time.monotonic() < deadline:
            time.sleep(0.1)
            delivered = ray.get(self.seen.holds_all.remote(before))
        ray.get(self.seen.finish.remote(i))
        return {"id": [i], "previous_delivered": [delivered]}


def test_finished_rows_reach_the_driver_before_the_next_is_done(ray_cluster: Any) -> None:
    # An actor reserves one CPU to be placed by default; with the session cluster's CPUs held by earlier
    # tests' replicas it would wait to start, and every row's calls to it with it.
    seen = ray_cluster.remote(num_cpus=0)(_Seen).remote()
    ds = ray_cluster.data.from_items([{"id": i} for i in range(4)]).map_batches(
        _WaitsForTheDriver,
        fn_constructor_kwargs={"seen": seen},
        compute=ray_cluster.data.ActorPoolStrategy(size=1),
        num_cpus=0.25,
        batch_size=1,
    )
    got = []
    for batch in finished_batches(ds, "pandas"):
        for i, ok in zip(batch["id"], batch["previous_delivered"], strict=True):
            ray_cluster.get(seen.hold.remote(int(i)))
            got.append((int(i), bool(ok)))
    ray_cluster.kill(seen)
    held = [i for i, ok in got if not ok]
    assert sorted(i for i, _ in got) == list(range(4))
    assert not held, (
        f"rows {held} finished while the driver still lacked a row finished before them ({_WAIT_FOR_DRIVER_S:.0f} s)"
    )


class _Slow:
    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        time.sleep(6)
        return batch


@pytest.mark.parametrize("llm_bound", [False, True])
def test_a_slow_llm_bound_map_is_not_failed_for_lack_of_progress(ray_cluster: Any, llm_bound: bool) -> None:
    """Ray Data's no-progress guard (30 min by default, 2 s here) fails a map whose blocks take longer;
    LLM-bound loops turn it off, since their calls have their own timeouts."""
    from ray.data import DataContext
    from ray.data.exceptions import ExecutionTimeoutError

    ctx = DataContext.get_current()
    default = ctx.execution_no_progress_timeout_s
    ctx.execution_no_progress_timeout_s = 2
    try:
        ds = ray_cluster.data.from_items([{"id": 0}]).map_batches(
            _Slow, compute=ray_cluster.data.ActorPoolStrategy(size=1), num_cpus=0.25, batch_size=1
        )
        if llm_bound:
            assert [int(i) for b in finished_batches(ds, "pandas", llm_bound=True) for i in b["id"]] == [0]
        else:
            with pytest.raises(ExecutionTimeoutError):
                list(finished_batches(ds, "pandas"))
    finally:
        ctx.execution_no_progress_timeout_s = default
