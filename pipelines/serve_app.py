"""Serve application builders for config-file deployments: a KubeRay RayService, ``serve deploy``, ``serve run``.

``pipelines.serve`` starts Ray and deploys from the command line; a RayService instead names importable
builders in its ``serveConfigV2`` and passes their ``args``. Both compose the same hydra config
(``conf/serve.yaml``) and build through the same code (``actors.deploy.serving_apps``), so a RayService runs
exactly the applications ``python -m pipelines.serve <overrides>`` would::

    applications:
      - name: medagent-llm                       # the LLM's own (llama.cpp or ray.serve.llm's vLLM)
        route_prefix: /llm
        import_path: pipelines.serve_app:llm_app_builder
        args: {overrides: [llm=qwen2.5-72b-instruct, cluster=multi_gpu, index_dir=/mnt/shared/index/x]}
      - name: medagent-retrieval                  # the Retriever, its own ingress (retrieval_app_name)
        route_prefix: /v1/retrieve
        import_path: pipelines.serve_app:retrieval_app_builder
        args: {overrides: [llm=qwen2.5-72b-instruct, cluster=multi_gpu, index_dir=/mnt/shared/index/x]}
      - name: medagent                            # ingress, reranker (+ interview sessions)
        route_prefix: /
        import_path: pipelines.serve_app:app_builder
        args: {overrides: [llm=qwen2.5-72b-instruct, cluster=multi_gpu, index_dir=/mnt/shared/index/x]}

``serve run pipelines.serve_app:app_builder overrides="llm=smollm2-135m-cpu index_dir=/abs/index"`` works
too (a string is split like a shell line). Builders only build; Serve's controller deploys.
"""

# No `from __future__ import annotations`: Serve converts ``args`` to the builder's pydantic model only when
# the parameter's annotation is the class itself, not a string (ray.serve._private.api).

import shlex
from collections.abc import Sequence
from typing import Any

from omegaconf import OmegaConf
from pydantic import BaseModel, ConfigDict, Field, field_validator

from medagent.config import ServeConfig
from pipelines.common import register_configs

# The typed schema that conf/serve.yaml names (serve_schema).
register_configs()


class ServeAppArgs(BaseModel):
    """``args`` of both builders: hydra overrides of ``conf/serve.yaml``, as on the command line."""

    model_config = ConfigDict(extra="forbid")

    overrides: list[str] = Field(default_factory=list)

    @field_validator("overrides", mode="before")
    @classmethod
    def _split_line(cls, value: Any) -> Any:
        # `serve run module:builder overrides="a=1 b=2"` passes one string.
        return shlex.split(value) if isinstance(value, str) else value


def compose_serve_config(overrides: Sequence[str]) -> ServeConfig:
    """``conf/serve.yaml`` with ``overrides``, typed; composes only (no Ray, no hydra.main, no chdir)."""
    from hydra import compose, initialize_config_module

    # The package, not a path: the conf/ YAML files are package data, so this works from an installed image.
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose(config_name="serve", overrides=list(overrides))
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def _parse(args: ServeAppArgs | dict[str, Any] | None) -> ServeAppArgs:
    return args if isinstance(args, ServeAppArgs) else ServeAppArgs.model_validate(args or {})


def _built(args: ServeAppArgs, retrieval: bool) -> Any:
    from actors.builder import retrieval_app_name
    from actors.deploy import needs_for_serve, serving_apps

    needs = needs_for_serve(compose_serve_config(_parse(args).overrides))
    want = retrieval_app_name(needs.app_name) if retrieval else needs.app_name
    # conf/serve.yaml always serves a retriever, so both applications are built.
    return next(a.app for a in serving_apps(needs) if a.name == want)


def app_builder(args: ServeAppArgs) -> Any:
    """The medagent application for ``import_path: pipelines.serve_app:app_builder`` (route prefix ``/``).
    Its deployments reach the Retriever in the application named ``retrieval_app_name(app_name)`` and the
    LLM in ``LLM_APP``: deploy ``retrieval_app_builder`` and ``llm_app_builder`` under those names, with the
    same overrides."""
    return _built(args, retrieval=False)


def retrieval_app_builder(args: ServeAppArgs) -> Any:
    """The retrieval application for ``import_path: pipelines.serve_app:retrieval_app_builder`` (route
    prefix ``/v1/retrieve``, name ``retrieval_app_name(app_name)``: ``medagent-retrieval`` by default)."""
    return _built(args, retrieval=True)


def llm_app_builder(args: ServeAppArgs) -> Any:
    """The LLM's own application for ``import_path: pipelines.serve_app:llm_app_builder`` (route prefix
    ``/llm``): llama.cpp on CPU, or vLLM's OpenAI application (``ray.serve.llm``). Deploy it under the name
    ``actors.builder.LLM_APP`` (``medagent-llm``): ``app_builder``'s ingress and sessions reach it by that
    name.

    Raises:
        ValueError: The LLM is an external endpoint (``backend=openai``): nothing is deployed for it.
    """
    from actors.backends import build_llm_app
    from actors.deploy import needs_for_serve

    cfg = compose_serve_config(_parse(args).overrides)
    if not needs_for_serve(cfg).llm_app:
        raise ValueError(
            f"llm {cfg.llm.name!r} has backend={cfg.llm.backend!r}: an endpoint outside the cluster, which "
            "llm_app_builder has nothing to deploy for (leave the application out)"
        )
    return build_llm_app(cfg.llm, cfg.cluster)
