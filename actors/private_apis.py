"""Every private Ray and Hydra API medagent uses, each with the reason no public one does instead.

Kept in one module so an upgrade has one place to check; each is pinned by the versions in
``pyproject.toml`` and exercised by a unit test (named with it). Imports happen inside the functions:
importing this module costs nothing and imports no Ray.
"""

from __future__ import annotations

import os
from typing import Any


def ray_joins_loopback_cluster_unsafely() -> bool:
    """Whether the imported Ray will dial the machine's network address when it joins a cluster.

    Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` once, at import; only the constant it set tells whether
    this process imported Ray before ``actors.builder.ray_env`` could set it. No public API exposes it
    (``pipelines.common.ray_session``; tests/unit/test_worker_niceness.py drives the same session).
    """
    from ray._private import ray_constants

    return bool(ray_constants.ENABLE_RAY_CLUSTER)


def direct_ingress_enabled() -> bool:
    """Whether Serve runs with direct ingress (``cluster.serve.direct_ingress``). The controller read the
    variable when it started, possibly before this process set it: Serve's constant says what it read, and
    no public API reports it."""
    from ray.serve._private import constants

    return bool(
        constants.RAY_SERVE_ENABLE_DIRECT_INGRESS or os.environ.get("RAY_SERVE_ENABLE_DIRECT_INGRESS") == "1"
    )


def serve_target_groups(app_names: list[str]) -> list[Any]:
    """The HTTP target groups (replica addresses) of each application, from the Serve controller.

    Under direct ingress Serve publishes the replica ports only as these target groups (the list its HAProxy
    mode routes by); neither ``serve.status()`` nor the dashboard's REST API lists them
    (``actors.builder.direct_ingress_urls``; tests/unit/test_direct_ingress.py).
    """
    import ray
    from ray.serve._private import constants

    controller = ray.get_actor(constants.SERVE_CONTROLLER_NAME, namespace=constants.SERVE_NAMESPACE)
    groups: list[Any] = []
    for app in app_names:
        groups.extend(ray.get(controller.get_target_groups.remote(app)))
    return groups


def kv_get(key: bytes) -> bytes | None:
    """A value of Ray's cluster-wide internal key-value store.

    ``pipelines.common.run_llm_app`` keeps the running LLM application's config fingerprint here, so a
    pipeline sharing the cluster keeps an engine that took minutes to load. Serve's public status has no
    per-application metadata (``serve.status()`` lists names and states, not the arguments an application
    was built with), and ``serve.run`` gives every deployment a new random version, so it cannot tell
    (tests/unit/test_vllm_tier.py pins the fingerprint; tests/integration/test_vllm_tier.py the reuse).
    """
    from ray.experimental import internal_kv

    value = internal_kv._internal_kv_get(key)
    return None if value is None else bytes(value)


def kv_put(key: bytes, value: bytes) -> None:
    """Stores ``value`` under ``key`` in Ray's internal key-value store (see ``kv_get`` for why)."""
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(key, value, overwrite=True)


def split_sweep(params: list[str]) -> list[list[str]]:
    """Hydra's own multirun expansion of sweep overrides into one override list per job.

    ``BasicSweeper.split_arguments`` is what ``-m`` runs; Hydra has no public function for it, and reusing
    it keeps ``pipelines.run_suite``'s cells identical to the jobs of ``run_benchmark -m``. Pinned by
    hydra-core==1.3.8 in pyproject.toml; tests/unit/test_run_suite.py catches a change.
    """
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(params)
    [cells] = BasicSweeper.split_arguments(parsed, max_batch_size=None)
    return [list(c) for c in cells]
