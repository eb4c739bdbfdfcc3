"""Start the medagent Serve application: ``python -m pipelines.serve index_dir=/abs/index``.

The LLM is its own application (``medagent-llm`` under ``/llm``: llama.cpp on CPU, or Ray's own
``ray.serve.llm`` OpenAI application with ``llm.backend=vllm``), as in every pipeline. The main
application holds the ingress, the reranker and, with ``interview_sessions.enabled=true``, the
history-taking sessions a person answers as the patient; its ``/v1/chat/completions`` forwards to the CPU
LLM's application by handle. The retriever is an application of its own at ``/v1/retrieve``
(``actors.apps``). ``actors.deploy`` decides, ``pipelines.common.deploy`` deploys. Prints the routes, then
serves until Ctrl-C.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from medagent.config import ServeConfig
from medagent.history.live.sessions import check_context
from pipelines.common import (
    UsageError,
    deploy,
    log,
    ray_session,
    register_configs,
    setup_logging,
    usage_errors,
)


def start(cfg: ServeConfig) -> dict[str, Any]:
    """Deploys the applications on the running Ray cluster (``pipelines.common.deploy``); returns the base
    URL and the routes."""
    from ray import serve

    from actors.apps import INTERVIEW_ROUTES, ROUTES
    from actors.builder import LLM_APP, LLM_ROUTE, direct_ingress_urls
    from actors.deploy import needs_for_serve

    needs = needs_for_serve(cfg)
    t0 = time.perf_counter()
    deploy(needs)
    base = f"http://{cfg.cluster.serve.http_host}:{cfg.cluster.serve.http_port}"
    log.info("application %r up in %.1fs", cfg.app_name, time.perf_counter() - t0)
    routes = [f"{base}{r}" for r in ROUTES]
    if cfg.interview_sessions.enabled:
        routes += [f"{r.split()[0]} {base}{r.split()[1]}" for r in INTERVIEW_ROUTES]
    if needs.llm_app:
        routes.append(f"{base}{LLM_ROUTE}/v1/chat/completions  (application {LLM_APP!r})")
    # cluster.serve.direct_ingress: each application's replica also answers its routes on its own port.
    direct = direct_ingress_urls(list(serve.status().applications))
    routes += [
        f"{url}  (direct ingress to application {app!r}: its routes, no proxy)" for app, url in direct.items()
    ]
    return {"base_url": base, "routes": routes}


def check(cfg: ServeConfig) -> None:
    """Refuses, before Ray starts, a config that could not serve what it promises (``UsageError``)."""
    if cfg.interview_sessions.enabled:
        try:
            check_context(cfg.interview_sessions, cfg.llm)
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def serve_forever(cfg: ServeConfig) -> None:
    check(cfg)
    with ray_session(cfg.cluster):
        info = start(cfg)
        print("\nroutes:\n  " + "\n  ".join(info["routes"]) + "\n\nCtrl-C stops.", flush=True)
        if not cfg.block:
            return
        stop = threading.Event()

        def request_stop(signum: int, _frame: object) -> None:
            if stop.is_set():
                log.info("already shutting down")  # a second Ctrl-C must not abort the clean shutdown
            stop.set()

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        while not stop.wait(1.0):
            pass
        log.info("shutting down")  # ray_session's exit shuts Serve and Ray down cleanly


register_configs()  # conf/serve.yaml's serve_schema among them


@hydra.main(config_path="../conf", config_name="serve", version_base="1.3")
def main(cfg: DictConfig) -> None:
    setup_logging()
    with usage_errors():
        serve_forever(OmegaConf.to_object(cfg))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
