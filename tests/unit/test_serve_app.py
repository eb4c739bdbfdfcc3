"""pipelines.serve_app: the RayService builders compose conf/serve.yaml and build through the serve pipeline.

Builds only: the builders are called as Ray Serve calls them (its own args handling), with the heavy builders
replaced by a recorder returning a tiny real ``Application``; Ray is never started.
"""

from __future__ import annotations

from typing import Any

import pytest
from ray import serve
from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
from ray.serve.deployment import Application

from actors.apps import ServeApp
from actors.builder import RETRIEVE_ROUTE, retrieval_app_name
from pipelines import serve_app

OVERRIDES = [
    "llm=smollm2-135m-cpu",
    "retriever=hybrid",
    "cluster=single_gpu",
    "index_dir=/mnt/shared/index/x",
]


class _Stub:
    def __call__(self) -> str:
        return "ok"


_STUB: Any = serve.deployment(_Stub)


def _build(builder: Any, args: dict[str, Any]) -> Application:
    """As Serve's controller calls a builder named in a config file (args as a dict)."""
    return call_user_app_builder_with_args_if_necessary(builder, args)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def recorder(name: str) -> Any:
        def build(*args: Any, **kwargs: Any) -> Application:
            calls.append((name, args, kwargs))
            return _STUB.bind()

        return build

    def serving(*args: Any, **kwargs: Any) -> list[ServeApp]:
        # Two applications, as actors.apps.build_serving_apps returns them when a retriever is configured.
        calls.append(("serving", args, kwargs))
        main = kwargs["name"]
        retrieval = [ServeApp(retrieval_app_name(main), RETRIEVE_ROUTE, _STUB.bind())] if args[1] else []
        return [*retrieval, ServeApp(main, "/", _STUB.bind())]

    monkeypatch.setattr("actors.apps.build_serving_apps", serving)
    monkeypatch.setattr("actors.backends.build_llm_app", recorder("llm"))
    return calls


def test_compose_applies_overrides_without_starting_anything() -> None:
    cfg = serve_app.compose_serve_config(OVERRIDES)
    assert cfg.llm.name == "smollm2-135m-cpu" and cfg.retriever.name == "hybrid"
    assert cfg.cluster.name == "single_gpu" and cfg.index_dir == "/mnt/shared/index/x"


def test_app_builder_builds_what_the_serve_pipeline_builds(recorded: list[Any]) -> None:
    app = _build(serve_app.app_builder, {"overrides": OVERRIDES})
    assert isinstance(app, Application)
    ((name, args, kwargs),) = recorded
    llm, retriever, reranker, index_dir, cluster = args
    assert name == "serving" and llm.name == "smollm2-135m-cpu" and llm.backend == "llamacpp"
    assert retriever.name == "hybrid" and reranker.name == "mpnet-cpu"
    assert index_dir == "/mnt/shared/index/x" and cluster.name == "single_gpu"
    assert kwargs["interview_sessions"].enabled is False and kwargs["sessions_llm"] is llm
    assert kwargs["name"] == "medagent"


def test_retrieval_app_builder_builds_the_retrieval_application(recorded: list[Any]) -> None:
    app = _build(serve_app.retrieval_app_builder, {"overrides": [*OVERRIDES, "app_name=rag"]})
    assert isinstance(app, Application)
    ((_, args, kwargs),) = recorded
    assert args[1].name == "hybrid" and kwargs["name"] == "rag"  # its name: retrieval_app_name("rag")


def test_vllm_models_are_a_separate_llm_application(recorded: list[Any]) -> None:
    overrides = ["llm=qwen2.5-72b-instruct", "cluster=multi_gpu", "index_dir=/mnt/shared/index/x"]
    _build(serve_app.llm_app_builder, {"overrides": overrides})
    _build(serve_app.app_builder, {"overrides": overrides})
    (llm_name, llm_args, _), (app_name, app_args, _) = recorded
    assert llm_name == "llm" and llm_args[0].tensor_parallel_size == 4 and llm_args[1].name == "multi_gpu"
    assert app_name == "serving" and app_args[0] is None  # vLLM is not part of the medagent application


def test_llm_app_builder_builds_the_cpu_llm_application_too(recorded: list[Any]) -> None:
    # The CPU LLM is its own application, as vLLM is; the main application reaches it by handle.
    _build(serve_app.llm_app_builder, {"overrides": OVERRIDES})
    _build(serve_app.app_builder, {"overrides": OVERRIDES})
    (llm_name, llm_args, _), (app_name, app_args, _) = recorded
    assert llm_name == "llm" and llm_args[0].backend == "llamacpp" and llm_args[1].name == "single_gpu"
    assert app_name == "serving" and app_args[0] == llm_args[0]  # its ingress forwards OpenAI chat there


def test_llm_app_builder_refuses_an_external_endpoint(recorded: list[Any]) -> None:
    with pytest.raises(ValueError, match="nothing to deploy"):
        overrides = ["llm=openai-endpoint", "llm.served_name=m", "llm.base_url=http://api.example/v1"]
        serve_app.llm_app_builder(serve_app.ServeAppArgs(overrides=overrides))
    assert recorded == []


def test_args_accept_a_command_line_string_and_refuse_unknown_keys() -> None:
    args = serve_app.ServeAppArgs.model_validate({"overrides": "llm=smollm2-135m-cpu 'index_dir=/a b'"})
    assert args.overrides == ["llm=smollm2-135m-cpu", "index_dir=/a b"]
    with pytest.raises(ValueError, match="overide"):
        serve_app.ServeAppArgs.model_validate({"overide": []})
