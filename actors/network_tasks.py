"""Ray tasks for the network analysis: a thin ``map_fn`` that runs library calls as Ray tasks.

``medagent.network`` takes a ``map``-like executor for its null-sample batches; ``ray_map`` is that executor
on Ray. The batches are pure functions of their arguments, so results equal the serial ``map``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import ray


@ray.remote(num_cpus=1, max_retries=3)
def call(fn: Callable[[Any], Any], item: Any) -> Any:
    """Runs one library call (``medagent.network.nulls.null_nodf_batch`` or ``null_q_batch``) on a worker."""
    return fn(item)


def ray_map(fn: Callable[[Any], Any], items: Iterable[Any], num_cpus: float = 1.0) -> list[Any]:
    """``map(fn, items)`` with one Ray task per item; results in input order.

    ``fn`` must be importable by the workers (a module-level function of an installed package); it is pickled
    by reference. ``num_cpus`` is each task's CPU share.
    """
    task = call.options(num_cpus=num_cpus)
    return list(ray.get([task.remote(fn, it) for it in items]))
