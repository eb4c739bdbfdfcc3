"""The one place that sets replica counts, CPU/GPU shares and concurrency for every Ray component.

Values come from ``conf/cluster/*.yaml`` (``ClusterConfig``); switching ``cluster=`` changes the
resources, never the code. Builders only build: they never call ``ray.init`` or ``serve.run``.
"""

from __future__ import annotations

import os
from typing import Any

from medagent.config import ClusterConfig
from medagent.llm.endpoints import HttpEndpoint, ServiceHandles, ServicesEndpoint

LLM_APP = "medagent-llm"
APP = "medagent"
LLM_DEPLOYMENT = "LlamaCppServer"
LLM_ROUTE = "/llm"
RETRIEVER_DEPLOYMENT = "Retriever"
RETRIEVE_ROUTE = "/v1/retrieve"


def retrieval_app_name(app: str = APP) -> str:
    """The application that serves ``app``'s retriever (``actors.apps``): its own, with the Retriever
    deployment as its HTTP ingress at ``RETRIEVE_ROUTE``."""
    return f"{app}-retrieval"


# Fault tolerance of the Ray Data worker pools (agent, annotation and interview workers) is Ray Data's own
# default for actor pools, which we rely on rather than restate: Ray 2.60 takes max_restarts /
# max_task_retries only through map_batches' **ray_remote_args, deprecated (removed in 2.64).
# tests/unit/test_fault_tolerance.py pins these defaults, so an upgrade that changes them fails loudly:
#   max_restarts=-1      a pool actor that dies (process killed, node lost) is restarted, without limit;
#   max_task_retries=-1  the batches it held are retried on the restarted actor;
#   actor_task_retry_on_errors=False  exceptions raised by our code are not retried (endpoint failures are
#                        retried with back-off inside the LLM / retrieval clients, then become the
#                        question's `error`, counted against the run's error budget);
#   max_errored_blocks=0 a batch that fails for good fails the run: no result is silently dropped.
# Retried batches cannot duplicate results: the driver writes by question id (RunDir.append_predictions,
# append_records). Caveat: a batch that kills its worker every time is retried forever.


def ray_env(cluster: ClusterConfig) -> None:
    """Environment that Ray reads when it is imported: call before the first ``import ray`` of a driver
    (``ray_init_kwargs`` does; ``pipelines.common.ray_session`` refuses a Ray imported without it)."""
    if cluster.ray.loopback_only:
        # Must be set before ray is imported by the driver, and is inherited by the workers. A driver that
        # joins a cluster on loopback (cluster=sim_multi_node) needs it too, or it looks for its raylet at
        # the machine's network address.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if cluster.ray.auth_mode:
        # Read when ray is imported and by ray.init; a driver joining a token cluster without it is refused.
        os.environ.setdefault("RAY_AUTH_MODE", cluster.ray.auth_mode)
    if cluster.ray.worker_niceness is not None and cluster.ray.address is None:
        # Read by the raylet this ray.init starts; an explicit RAY_worker_niceness in the environment wins.
        os.environ.setdefault("RAY_worker_niceness", str(cluster.ray.worker_niceness))  # noqa: SIM112
    if cluster.serve.direct_ingress and cluster.ray.address is None:
        # Read when Serve's controller and replicas import it; the raylet this driver starts, and so every
        # worker, inherits the driver's environment.
        os.environ.setdefault("RAY_SERVE_ENABLE_DIRECT_INGRESS", "1")


def ray_init_kwargs(cluster: ClusterConfig) -> dict[str, Any]:
    """Arguments for ``ray.init``. A local cluster listens on loopback only (see ../shared/STACK.md)."""
    ray_env(cluster)
    kwargs: dict[str, Any] = {
        "include_dashboard": cluster.ray.include_dashboard,
        "ignore_reinit_error": True,
        "log_to_driver": True,
    }
    if cluster.ray.address:
        kwargs["address"] = cluster.ray.address
    else:
        # A new cluster of this process's own. Without "local", ray.init joins whatever cluster
        # /tmp/ray/ray_current_cluster names (any `ray start` on the machine) and then refuses num_cpus.
        kwargs["address"] = "local"
        if cluster.ray.num_cpus:
            kwargs["num_cpus"] = cluster.ray.num_cpus
        if cluster.ray.num_gpus is not None:
            kwargs["num_gpus"] = cluster.ray.num_gpus
    if cluster.ray.metrics_export_port and not cluster.ray.address:
        # Only a new local cluster takes it; nodes of a running cluster got theirs from `ray start`.
        kwargs["_metrics_export_port"] = cluster.ray.metrics_export_port
    if cluster.ray.runtime_env:
        kwargs["runtime_env"] = cluster.ray.runtime_env
    return kwargs


def serve_http_options(cluster: ClusterConfig) -> dict[str, Any]:
    return {
        "host": cluster.serve.http_host,
        "port": cluster.serve.http_port,
        "location": cluster.serve.proxy_location,
    }


def direct_ingress_urls(app_names: list[str]) -> dict[str, str]:
    """Base URL of each application's ingress replica under direct ingress (``cluster.serve.direct_ingress``),
    by application name; empty without it (the replica ports come from a private Serve call:
    ``actors.private_apis.serve_target_groups``)."""
    from actors.private_apis import direct_ingress_enabled, serve_target_groups

    if not direct_ingress_enabled():
        return {}
    return direct_targets(serve_target_groups(app_names))


def direct_targets(groups: list[Any]) -> dict[str, str]:
    """``{app name: http://ip:port}`` of the first replica of each HTTP target group that points at
    replicas (a target group without an app name points at the proxy)."""
    return {
        g.app_name: f"http://{g.targets[0].ip}:{g.targets[0].port}"
        for g in groups
        if g.app_name and g.targets and str(getattr(g.protocol, "value", g.protocol)).upper() == "HTTP"
    }


def serve_start_kwargs(cluster: ClusterConfig) -> dict[str, Any]:
    """``serve.start`` arguments: HTTP on the configured host/port; controller and proxy logs at
    ``cluster.serve.log_level`` (their INFO lines would otherwise interleave with the progress bar)."""
    return {
        "http_options": serve_http_options(cluster),
        "logging_config": {"log_level": cluster.serve.log_level},
    }


def llm_deployment_options(cluster: ClusterConfig) -> dict[str, Any]:
    return {
        "name": LLM_DEPLOYMENT,
        "num_replicas": cluster.llm.replicas,
        "max_ongoing_requests": cluster.llm.max_ongoing_requests,
        "ray_actor_options": {"num_cpus": cluster.llm.num_cpus, "num_gpus": cluster.llm.num_gpus},
        # A replica that dies is replaced by Serve; health checks catch a wedged engine.
        "health_check_period_s": 10,
        "health_check_timeout_s": 60,
        # One access-log line per LLM call drowns the driver's output; Serve metrics still count them.
        "logging_config": {"enable_access_log": False},
    }


def services_endpoint(app: str = APP, base_url: str | None = None) -> ServicesEndpoint:
    """How agent workers reach the retriever and reranker: handles (the Reranker in ``app``, the Retriever
    in ``retrieval_app_name(app)``), or HTTP at ``base_url``."""
    if base_url:
        return HttpEndpoint(base_url=base_url)
    return ServiceHandles(app=app, retriever_app=retrieval_app_name(app))


def llm_worker_pool(cluster: ClusterConfig, concurrency: int) -> Any:
    """The actor pool of an async worker that mostly waits on the LLM, running ``concurrency`` tasks at once.

    Ray Data runs an async UDF's batches concurrently only within one task (one block), and a map actor
    takes one task at a time unless told otherwise: with small batches (one interview, one CPU question)
    each actor ran one at a time whatever the worker's semaphore allowed. ``max_concurrent_calls_per_actor``
    lets ``concurrency`` tasks share the actor's event loop, where the semaphore still bounds the work.
    """
    import ray.data

    return ray.data.ActorPoolStrategy(
        size=cluster.workers.count, max_concurrent_calls_per_actor=max(1, concurrency)
    )


def agent_worker_map_kwargs(cluster: ClusterConfig, concurrency: int = 1) -> dict[str, Any]:
    """``map_batches`` options for ``AgentWorker`` (``concurrency``: ``agent.max_concurrency``).

    Workers take a fractional CPU: Ray Data hangs when actors hold every CPU of a small machine
    (ray-project/ray#44687), and an agent worker mostly waits on the LLM anyway.
    """
    return {
        "compute": llm_worker_pool(cluster, concurrency),
        "num_cpus": cluster.workers.num_cpus,
        "num_gpus": cluster.workers.num_gpus,
        "batch_size": cluster.workers.batch_size,
    }


def prepare_map_kwargs(cluster: ClusterConfig) -> dict[str, Any]:
    """``map_batches`` options of the stateless read/normalize/chunk tasks of ``index_corpus``."""
    return {"num_cpus": cluster.indexing.prepare_num_cpus, "batch_size": 1024}


def embed_worker_map_kwargs(cluster: ClusterConfig) -> dict[str, Any]:
    """``map_batches`` options for ``EmbedWorker``.

    One batch is one shard (``batch_size=1`` over rows that each name a chunk block). CPU actors take a
    fractional CPU (ray-project/ray#44687: Ray Data hangs when actors hold every CPU) and set their torch
    threads themselves (``embed_worker_constructor_kwargs``); on a cluster
    each actor holds ``embed_num_gpus`` and the pool has ``embed_workers`` actors.
    """
    import ray.data

    return {
        "compute": ray.data.ActorPoolStrategy(size=cluster.indexing.embed_workers),
        "num_cpus": cluster.indexing.embed_num_cpus,
        "num_gpus": cluster.indexing.embed_num_gpus,
        "batch_size": 1,
    }


def embed_worker_constructor_kwargs(cluster: ClusterConfig) -> dict[str, Any]:
    """Torch threads per embedding actor: ``embed_threads``, else this node's cores shared by the pool."""
    threads = cluster.indexing.embed_threads or max(
        1, (os.cpu_count() or 1) // max(1, cluster.indexing.embed_workers)
    )
    return {"threads": threads if cluster.indexing.embed_num_gpus == 0 else None}


def retriever_threads(cluster: ClusterConfig) -> int | None:
    """Torch threads per CPU retriever replica: ``cluster.retrieval.retriever_threads``; None leaves Ray's default
    (one per whole CPU the replica holds) and is always None on GPU."""
    if cluster.retrieval.retriever_num_gpus:
        return None
    # Not the node's cores by default: measured on 2 cores, two encoder threads in the replica contend with
    # the proxy and the ingress and doubled the latency Serve adds (benchmarks/bench_retrieval.py).
    return cluster.retrieval.retriever_threads


def annotate_worker_map_kwargs(cluster: ClusterConfig, concurrency: int = 1) -> dict[str, Any]:
    """``map_batches`` options for ``AnnotateWorker`` (LLM interview annotation).

    Same shape as the agent workers: a small actor pool on fractional CPUs (ray-project/ray#44687), since a
    worker mostly waits on the LLM; interviews are long, so a batch holds ``batch_size`` of them.
    """
    return {
        "compute": llm_worker_pool(cluster, concurrency),
        "num_cpus": cluster.workers.num_cpus,
        "num_gpus": cluster.workers.num_gpus,
        "batch_size": cluster.workers.batch_size,
    }


def interview_worker_map_kwargs(cluster: ClusterConfig, concurrency: int) -> dict[str, Any]:
    """``map_batches`` options for ``InterviewWorker`` (history taking against the simulated patient).

    Same shape as the agent workers: a small pool of actors on fractional CPUs (ray-project/ray#44687),
    since a worker mostly waits on the LLM. An interview is minutes of LLM calls, so a batch is ONE
    interview: each reaches the driver (and the run dir) as soon as it finishes; ``concurrency``
    (``agent.max_concurrency``) of them run at once on each actor (``llm_worker_pool``).
    """
    return {
        "compute": llm_worker_pool(cluster, concurrency),
        "num_cpus": cluster.workers.num_cpus,
        "num_gpus": cluster.workers.num_gpus,
        "batch_size": 1,
    }


def _retrieval_pin(cluster: ClusterConfig) -> dict[str, Any]:
    """``resources`` that keep retriever and reranker replicas on the retrieval worker group (embedding
    actors stay unpinned: indexing runs while the LLM nodes are idle and uses their GPUs too)."""
    return {"resources": dict(cluster.retrieval.resources)} if cluster.retrieval.resources else {}


def _replicas(cluster: ClusterConfig, name: str, fixed: int) -> dict[str, Any]:
    """Fixed ``num_replicas``, or Serve autoscaling when ``cluster.serve.autoscaling`` names the deployment."""
    auto = cluster.serve.autoscaling.get(name)
    return {"autoscaling_config": dict(auto)} if auto else {"num_replicas": fixed}


# Serve reads these when a replica process starts; see ClusterServeConfig.same_loop.
SAME_LOOP_ENV = {
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
}


def _same_loop(cluster: ClusterConfig) -> dict[str, Any]:
    """``ray_actor_options`` entries that put a replica's request path on its own event loop. Ray merges a
    replica's ``env_vars`` into the job's runtime_env (``cluster.ray.runtime_env``) rather than replacing it."""
    return {"runtime_env": {"env_vars": dict(SAME_LOOP_ENV)}} if cluster.serve.same_loop else {}


def serving_deployment_options(cluster: ClusterConfig) -> dict[str, dict[str, Any]]:
    """Options of every deployment of the serving application, by deployment name.

    Fault tolerance: Serve's controller replaces any replica that dies or fails its health check (Serve's
    defaults, every 10 s with a 30 s timeout; the LLM's are set in ``llm_deployment_options``), on another
    node if its node is lost. Callers retry while it does: the LLM clients (``medagent.llm``: handle and
    HTTP) and the retrieval clients (``medagent.agent.remote_services``) back off exponentially over
    ``llm.max_retries`` / 3 attempts before the question is recorded with an ``error``.
    """
    quiet = {"logging_config": {"enable_access_log": False}}
    return {
        "Ingress": {
            "name": "Ingress",
            **_replicas(cluster, "Ingress", 1),
            "ray_actor_options": {"num_cpus": cluster.serve.ingress_num_cpus, **_same_loop(cluster)},
            "max_ongoing_requests": 256,
            # Access lines follow cluster.serve.log_level (WARNING: none). On a small node one log
            # line per request (written, tailed, shipped to the driver) was a measurable share of the
            # retrieve route's added latency; Serve's request metrics still count every request.
            "logging_config": {"log_level": cluster.serve.log_level},
        },
        RETRIEVER_DEPLOYMENT: {
            "name": RETRIEVER_DEPLOYMENT,
            **_replicas(cluster, RETRIEVER_DEPLOYMENT, cluster.retrieval.retriever_replicas),
            **quiet,
            "ray_actor_options": {
                "num_cpus": cluster.retrieval.retriever_num_cpus,
                "num_gpus": cluster.retrieval.retriever_num_gpus,
                **_retrieval_pin(cluster),
                **_same_loop(cluster),
            },
            "max_ongoing_requests": 128,
        },
        "Reranker": {
            "name": "Reranker",
            **_replicas(cluster, "Reranker", cluster.retrieval.reranker_replicas),
            **quiet,
            "ray_actor_options": {
                "num_cpus": cluster.retrieval.reranker_num_cpus,
                "num_gpus": cluster.retrieval.reranker_num_gpus,
                **_retrieval_pin(cluster),
                **_same_loop(cluster),
            },
            "max_ongoing_requests": 64,
        },
        "InterviewSessions": {
            "name": "InterviewSessions",
            # One replica: session state lives in its memory (a second replica would not see it).
            "num_replicas": 1,
            **quiet,
            # Holds the sentence encoder of the redundancy check; waits on the LLM otherwise.
            "ray_actor_options": {"num_cpus": cluster.serve.ingress_num_cpus},
            "max_ongoing_requests": 64,
        },
        LLM_DEPLOYMENT: {
            **llm_deployment_options(cluster),
            **_replicas(cluster, LLM_DEPLOYMENT, cluster.llm.replicas),
        },
    }
