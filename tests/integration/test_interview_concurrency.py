"""InterviewWorker's pool runs ``agent.max_concurrency`` interviews at once on one actor.

A batch is one interview, and a Ray Data map actor takes one task at a time unless told otherwise: the
async worker's own semaphore then never had a second interview to admit. This test counts how many calls
of an async callable class are inside it at once under ``interview_worker_map_kwargs`` (no clocks).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actors.builder import interview_worker_map_kwargs
from medagent.config import ClusterConfig


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
    cluster = ClusterConfig(num_workers=1, worker_num_cpus=0.25)
    ds = ray_cluster.data.from_items([{"id": i} for i in range(6)]).map_batches(
        _Counting,
        fn_constructor_kwargs={"limit": concurrency},
        **interview_worker_map_kwargs(cluster, concurrency),
    )
    rows = ds.take_all()
    assert sorted(r["id"] for r in rows) == list(range(6))
    assert max(r["most"] for r in rows) == concurrency
