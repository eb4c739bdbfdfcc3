"""Start the medagent Serve application: ``python -m pipelines.serve index_dir=/abs/index``.

One application holds the ingress, the LLM (llama.cpp on CPU), the reranker and, with
``interview_sessions.enabled=true``, the history-taking sessions a person answers as the patient; the
retriever is an application of its own at ``/v1/retrieve`` (``actors.apps``). With ``llm.backend=vllm``
the LLM is Ray's own ``ray.serve.llm`` OpenAI application, served beside them under ``/llm``. Prints the
routes, then serves until Ctrl-C.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from actors.apps import ServeApp
from medagent.config import ServeConfig
from pipelines.common import log, ray_session, register_configs, run_apps, setup_logging


def build_apps(cfg: ServeConfig) -> list[ServeApp]:
    """The medagent applications (the retriever's; the ingress, reranker and, on CPU, the LLM); builds,
    never starts.

    Shared with ``pipelines.serve_app`` (the RayService / ``serve deploy`` entry point). A vLLM LLM is a
    separate application (``actors.builder.build_llm_app``), served beside these under ``/llm``.
    """
    from actors.apps import build_serving_apps
    from actors.builder import APP

    llm = cfg.llm if cfg.llm.backend == "llamacpp" else None
    index_dir = str(Path(cfg.index_dir).resolve()) if cfg.index_dir else None
    return build_serving_apps(
        llm,
        cfg.retriever,
        cfg.reranker,
        index_dir,
        cfg.cluster,
        interview_sessions=cfg.interview_sessions,
        sessions_llm=cfg.llm,
        name=cfg.app_name or APP,
    )


def start(cfg: ServeConfig) -> dict[str, Any]:
    """Deploys the application on the running Ray cluster; returns its handle and base URL."""
    from ray import serve

    from actors.apps import INTERVIEW_ROUTES, ROUTES
    from actors.builder import LLM_APP, LLM_ROUTE, build_llm_app, direct_ingress_urls, serve_start_kwargs

    serve.start(**serve_start_kwargs(cfg.cluster))
    t0 = time.perf_counter()
    if cfg.llm.backend == "vllm":
        vllm_app = build_llm_app(cfg.llm, cfg.cluster)
        assert vllm_app is not None
        serve.run(vllm_app, name=LLM_APP, route_prefix=LLM_ROUTE)
    handle = run_apps(build_apps(cfg))
    base = f"http://{cfg.cluster.http_host}:{cfg.cluster.http_port}"
    log.info("application %r up in %.1fs", cfg.app_name, time.perf_counter() - t0)
    routes = [f"{base}{r}" for r in ROUTES]
    if cfg.interview_sessions.enabled:
        routes += [f"{r.split()[0]} {base}{r.split()[1]}" for r in INTERVIEW_ROUTES]
    if cfg.llm.backend == "vllm":
        routes.append(f"{base}{LLM_ROUTE}/v1/chat/completions  (ray.serve.llm)")
    # cluster.serve_direct_ingress: each application's replica also answers its routes on its own port.
    direct = direct_ingress_urls(list(serve.status().applications))
    routes += [
        f"{url}  (direct ingress to application {app!r}: its routes, no proxy)" for app, url in direct.items()
    ]
    return {"handle": handle, "base_url": base, "routes": routes}


def serve_forever(cfg: ServeConfig) -> None:
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


register_configs()
ConfigStore.instance().store(name="serve_schema", node=ServeConfig)


@hydra.main(config_path="../conf", config_name="serve", version_base="1.3")
def main(cfg: DictConfig) -> None:
    setup_logging()
    serve_forever(OmegaConf.to_object(cfg))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
