"""Every file under cluster/ is valid before it meets a cluster (``make validate-manifests``).

Kubernetes objects and every embedded pod template: kubernetes-validate (Kubernetes' own JSON schemas,
strict). KubeRay objects: our schema from KubeRay's v1 API reference, plus KubeRay's real CRDs when
``$MEDAGENT_KUBERAY_CRDS`` names a folder of them. Launcher YAML: Ray's own ray-schema.json. Beyond
schemas: the entry points compose with hydra, the pins and versions agree, the configs fit the pod shapes.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import sys
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.unit import _cluster_manifests as cm

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

DOCS = cm.all_documents()
CORE = [(f, d) for f, d in DOCS if not cm.is_kuberay(d)]
KUBERAY = [(f, d) for f, d in DOCS if cm.is_kuberay(d)]
TEMPLATES = [(f, d["kind"], where, t) for f, d in KUBERAY for where, t in cm.pod_templates(d)]
PYPROJECT = tomllib.loads((cm.REPO / "pyproject.toml").read_text(encoding="utf-8"))
RAY_PIN = next(d for d in PYPROJECT["project"]["dependencies"] if d.startswith("ray[")).split("==")[1]


def _id(item: tuple[Any, ...]) -> str:
    return ":".join(str(x) for x in item[:3] if isinstance(x, str))


def test_every_manifest_kind_is_present() -> None:
    kinds = {d["kind"] for _, d in DOCS}
    assert {"RayCluster", "RayJob", "RayService", "PersistentVolumeClaim"} <= kinds
    jobs = {d["metadata"]["name"] for _, d in KUBERAY if d["kind"] == "RayJob"}
    assert jobs == {"medagent-index", "medagent-table1", "medagent-interviews", "medagent-network"}


# Kubernetes schemas ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", cm.K8S_VERSIONS)
@pytest.mark.parametrize("item", CORE, ids=[f"{f}:{d['kind']}" for f, d in CORE])
def test_core_objects_validate_against_kubernetes(item: tuple[str, dict[str, Any]], version: str) -> None:
    kubernetes_validate.validate(item[1], version, strict=True)


@pytest.mark.parametrize("version", cm.K8S_VERSIONS)
@pytest.mark.parametrize("item", TEMPLATES, ids=[_id(t) for t in TEMPLATES])
def test_pod_templates_validate_against_kubernetes(
    item: tuple[str, str, str, dict[str, Any]], version: str
) -> None:
    *_, template = item
    kubernetes_validate.validate(cm.as_pod_template("t", template), version, strict=True)


def test_kubernetes_validation_is_strict() -> None:
    # Guards the two tests above: a misspelt pod field must fail, not be ignored.
    template = copy.deepcopy(TEMPLATES[0][3])
    template["spec"]["containers"][0]["volumeMount"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(cm.as_pod_template("t", template), cm.K8S_VERSIONS[-1], strict=True)


# KubeRay schemas ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("item", KUBERAY, ids=[f"{f}:{d['kind']}" for f, d in KUBERAY])
def test_kuberay_objects_validate_against_our_schema(item: tuple[str, dict[str, Any]]) -> None:
    assert cm.schema_errors(cm.kuberay_validator(), item[1]) == []


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda s: s.update(workerGroupsSpecs=[]), "workerGroupsSpecs"),  # misspelt field
        (lambda s: s["headGroupSpec"]["rayStartParams"].update({"num-cpus": 0}), "is not of type 'string'"),
        (lambda s: s["workerGroupSpecs"][0].pop("groupName"), "'groupName' is a required property"),
        (lambda s: s["workerGroupSpecs"][0].update(replicas=-1), "less than the minimum"),
    ],
)
def test_our_kuberay_schema_rejects_mistakes(mutate: Any, message: str) -> None:
    doc = copy.deepcopy(next(d for _, d in KUBERAY if d["kind"] == "RayCluster"))
    mutate(doc["spec"])
    assert any(message in e for e in cm.schema_errors(cm.kuberay_validator(), doc))


def test_our_schema_rejects_a_bad_submission_mode() -> None:
    doc = copy.deepcopy(next(d for _, d in KUBERAY if d["kind"] == "RayJob"))
    doc["spec"]["submissionMode"] = "K8sMode"
    assert cm.schema_errors(cm.kuberay_validator(), doc)


@pytest.mark.skipif(
    cm.crd_folder() is None,
    reason=f"${cm.CRDS_ENV} is not set: KubeRay's CRDs are not on PyPI; export them with "
    "`kubectl get crd rayclusters.ray.io rayjobs.ray.io rayservices.ray.io -o yaml` into a folder "
    "and point the variable at it (docs/CLUSTER.md)",
)
@pytest.mark.parametrize("item", KUBERAY, ids=[f"{f}:{d['kind']}" for f, d in KUBERAY])
def test_kuberay_objects_validate_against_the_real_crds(item: tuple[str, dict[str, Any]]) -> None:
    folder = cm.crd_folder()
    assert folder is not None and folder.is_dir(), f"${cm.CRDS_ENV}={folder} is not a folder"
    schemas = cm.load_crd_schemas(folder)
    doc = item[1]
    assert doc["kind"] in schemas, f"no CRD for {doc['kind']} in {folder} (found {sorted(schemas)})"
    assert cm.schema_errors(jsonschema.Draft7Validator(schemas[doc["kind"]]), doc) == []


def test_crd_loader_makes_unknown_fields_fail(tmp_path: Any) -> None:
    # The CRD path runs only where CRDs are exported; exercise its loader on a CRD-shaped file here.
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "spec": {
            "names": {"kind": "RayCluster"},
            "versions": [
                {
                    "name": "v1",
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": {
                                    "type": "object",
                                    "properties": {"rayVersion": {"type": "string"}},
                                },
                            },
                        }
                    },
                }
            ],
        },
    }
    (tmp_path / "crds.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [crd]}))
    schema = cm.load_crd_schemas(tmp_path)["RayCluster"]
    ok: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "x"},
        "spec": {"rayVersion": "2"},
    }
    assert cm.schema_errors(jsonschema.Draft7Validator(schema), ok) == []
    bad = copy.deepcopy(ok)
    bad["spec"]["headGroup"] = {}
    assert cm.schema_errors(jsonschema.Draft7Validator(schema), bad)


def test_worker_group_replicas_within_bounds() -> None:
    for name, doc in KUBERAY:
        for group in (cm.cluster_spec(doc) or {}).get("workerGroupSpecs", []):
            low, high = group.get("minReplicas", 0), group.get("maxReplicas", 2**31 - 1)
            assert low <= group.get("replicas", low) <= high, (name, group["groupName"])


def test_every_ray_pod_mounts_shared_storage_and_exports_metrics() -> None:
    for name, doc in KUBERAY:
        spec = cm.cluster_spec(doc)
        assert spec is not None
        groups = [spec["headGroupSpec"], *spec.get("workerGroupSpecs", [])]
        for group in groups:
            assert group["rayStartParams"]["metrics-export-port"] == "8080", name
            pod = group["template"]["spec"]
            claims = {
                v["persistentVolumeClaim"]["claimName"]
                for v in pod["volumes"]
                if "persistentVolumeClaim" in v
            }
            assert claims == {"medagent-shared"}, name
            for container in pod["containers"]:
                assert {"name": "shared", "mountPath": "/mnt/shared"} in container["volumeMounts"], name
                assert {"containerPort": 8080, "name": "metrics"} in container["ports"], name


# Launcher -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", cm.launcher_files(), ids=lambda p: p.name)
def test_launcher_yaml_validates_against_ray_schema(path: Any) -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    validate_config(prepare_config(copy.deepcopy(config)))  # what `ray up` runs before launching anything
    config["available_node_types"]["head"]["node_confg"] = {}
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(config))


# Versions, pins, entry points -----------------------------------------------------------------------------


def test_ray_and_image_versions_agree() -> None:
    images = set()
    for _, doc in DOCS:
        text = yaml.safe_dump(doc)
        images |= set(re.findall(r"image: (\S+)", text))
        spec = cm.cluster_spec(doc) if cm.is_kuberay(doc) else None
        if spec is not None:
            assert spec["rayVersion"] == RAY_PIN
    assert images == {f"registry.example.com/medagent:{PYPROJECT['project']['version']}"}
    dockerfile = (cm.CLUSTER / "Dockerfile").read_text(encoding="utf-8")
    assert f"FROM rayproject/ray:{RAY_PIN}-" in dockerfile
    for path in cm.launcher_files():
        assert yaml.safe_load(path.read_text())["docker"]["image"].startswith(f"rayproject/ray:{RAY_PIN}-")


def test_runtime_env_pins_match_pyproject() -> None:
    env = yaml.safe_load((cm.CLUSTER / "runtime_env.yaml").read_text(encoding="utf-8"))
    pins = [*PYPROJECT["project"]["dependencies"], *PYPROJECT["project"]["optional-dependencies"]["gpu"]]
    # Ray comes from the cluster image (a runtime_env cannot reinstall it); its version is checked above.
    expected = sorted(p for p in pins if not p.startswith("ray["))
    assert sorted(env["pip"]["packages"]) == expected
    assert all(p.endswith(f"=={RAY_PIN}") for p in pins if p.startswith("ray["))
    assert env["working_dir"] == "." and ".venv/" in env["excludes"] and "outputs/" in env["excludes"]


def _entrypoint_commands(entrypoint: str) -> list[tuple[str, list[str]]]:
    commands = []
    for part in entrypoint.split("&&"):
        words = shlex.split(part)
        assert words[:2] == ["python", "-m"] and words[2].startswith("pipelines."), part
        commands.append((words[2].removeprefix("pipelines."), words[3:]))
    return commands


RAYJOB_COMMANDS = [
    (d["metadata"]["name"], pipeline, overrides)
    for _, d in KUBERAY
    if d["kind"] == "RayJob"
    for pipeline, overrides in _entrypoint_commands(d["spec"]["entrypoint"])
]


@pytest.mark.parametrize("item", RAYJOB_COMMANDS, ids=[f"{n}:{p}" for n, p, _ in RAYJOB_COMMANDS])
def test_rayjob_entrypoints_compose_and_write_to_shared_storage(item: tuple[str, str, list[str]]) -> None:
    from pipelines import submit

    _, pipeline, overrides = item
    # The same checks pipelines.submit makes: known pipeline, absolute shared paths, composes, joins the cluster.
    submit.check_overrides(pipeline, overrides)
    submit.check_composes(pipeline, overrides)
    for override in overrides:
        if submit.override_key(override) in submit.PATH_KEYS:
            assert override.split("=", 1)[1].startswith("/mnt/shared/"), override


def test_cluster_configs_fit_the_pod_shapes() -> None:
    from pipelines.submit import compose_pipeline_config

    raycluster = next(d for _, d in KUBERAY if d["kind"] == "RayCluster")
    groups = {g["groupName"]: g for g in raycluster["spec"]["workerGroupSpecs"]}

    def gpus(group: str) -> int:
        return int(
            groups[group]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
        )

    for name in ("multi_gpu", "multi_node"):
        cfg = compose_pipeline_config("run_benchmark", [f"cluster={name}", "llm=qwen2.5-72b-instruct"])
        cluster = cfg.cluster
        assert cfg.llm.tensor_parallel_size == gpus("llm-gpu")  # one vLLM replica per llm-gpu pod
        assert cluster.llm.replicas <= groups["llm-gpu"]["maxReplicas"]
        assert cluster.retrieval.retriever_num_gpus + cluster.retrieval.reranker_num_gpus <= gpus(
            "retrieval-gpu"
        )
        total = (
            gpus("llm-gpu") * groups["llm-gpu"]["maxReplicas"]
            + gpus("retrieval-gpu") * groups["retrieval-gpu"]["maxReplicas"]
        )
        assert cluster.indexing.embed_workers * cluster.indexing.embed_num_gpus <= total
        assert cluster.ray.address == "auto" and not cluster.ray.loopback_only


def test_retrieval_replicas_are_pinned_to_a_group_that_advertises_the_resource() -> None:
    from actors.builder import serving_deployment_options
    from pipelines.submit import compose_pipeline_config

    def advertised(group: dict[str, Any]) -> dict[str, float]:
        # KubeRay passes `resources` to `ray start --resources` as a quoted JSON string.
        raw = group.get("rayStartParams", {}).get("resources")
        return json.loads(json.loads(raw)) if raw else {}

    for name in ("multi_gpu", "multi_node"):
        cluster = compose_pipeline_config("run_benchmark", [f"cluster={name}"]).cluster
        assert cluster.retrieval.resources, name
        options = serving_deployment_options(cluster)
        for deployment in ("Retriever", "Reranker"):
            assert options[deployment]["ray_actor_options"]["resources"] == cluster.retrieval.resources
        for file, doc in KUBERAY:
            spec = cm.cluster_spec(doc)
            groups = {g["groupName"]: g for g in (spec or {}).get("workerGroupSpecs", [])}
            if "retrieval-gpu" in groups:
                have = advertised(groups["retrieval-gpu"])
                assert all(have.get(k, 0) >= v for k, v in cluster.retrieval.resources.items()), file
            for group_name, group in groups.items():  # nothing else can take a retrieval replica
                if group_name != "retrieval-gpu":
                    assert not set(advertised(group)) & set(cluster.retrieval.resources), (file, group_name)
    launcher = yaml.safe_load((cm.LAUNCHER_DIR / "aws.yaml").read_text(encoding="utf-8"))
    assert launcher["available_node_types"]["retrieval_gpu"]["resources"]["retrieval_node"] >= 0.01
    assert launcher["available_node_types"]["llm_gpu"]["resources"]["llm_node"] >= 0.01


def test_each_vllm_replica_is_packed_on_one_llm_node() -> None:
    from omegaconf import OmegaConf

    from actors.gpu_llm import vllm_llm_kwargs
    from pipelines.submit import compose_pipeline_config

    for name in ("multi_gpu", "multi_node"):
        cfg = OmegaConf.to_object(
            compose_pipeline_config("run_benchmark", [f"cluster={name}", "llm=qwen2.5-72b-instruct"])
        )
        pg = vllm_llm_kwargs(cfg.llm, cfg.cluster)["placement_group_config"]  # type: ignore[attr-defined]
        assert pg["strategy"] == "STRICT_PACK"
        assert pg["bundle_per_worker"] == {"GPU": 1, "llm_node": 0.01}
        for file, doc in KUBERAY:
            groups = {g["groupName"]: g for g in (cm.cluster_spec(doc) or {}).get("workerGroupSpecs", [])}
            if "llm-gpu" in groups:
                raw = groups["llm-gpu"]["rayStartParams"]["resources"]
                assert json.loads(json.loads(raw))["llm_node"] >= 1, file


def test_serve_autoscaling_configs_are_valid() -> None:
    from ray.serve.config import AutoscalingConfig

    from pipelines.submit import compose_pipeline_config

    cfg = compose_pipeline_config("run_benchmark", ["cluster=multi_node"])
    assert cfg.cluster.serve.autoscaling
    for options in cfg.cluster.serve.autoscaling.values():
        AutoscalingConfig(**options)


def test_rayservice_runs_the_serve_pipelines_application() -> None:
    from ray.serve.schema import ServeDeploySchema

    from actors.builder import LLM_APP, LLM_ROUTE, RETRIEVE_ROUTE, retrieval_app_name
    from pipelines import serve_app

    service = next(d for _, d in KUBERAY if d["kind"] == "RayService")
    config = ServeDeploySchema.model_validate(yaml.safe_load(service["spec"]["serveConfigV2"]))
    apps = {app.name: app for app in config.applications}
    assert {a.import_path for a in apps.values()} == {
        "pipelines.serve_app:app_builder",
        "pipelines.serve_app:retrieval_app_builder",
        "pipelines.serve_app:llm_app_builder",
    }
    for app in apps.values():
        module, attr = app.import_path.split(":")
        assert module == "pipelines.serve_app" and callable(getattr(serve_app, attr))
    overrides = [app.args["overrides"] for app in apps.values()]
    assert all(o == overrides[0] for o in overrides)  # all applications must describe the same deployment
    cfg = serve_app.compose_serve_config(overrides[0])
    assert cfg.llm.backend == "vllm" and cfg.index_dir and cfg.index_dir.startswith("/mnt/shared/")
    # The ingress and sessions reach the LLM in the application of this name (a handle across applications).
    assert apps[LLM_APP].route_prefix == LLM_ROUTE and apps["medagent"].route_prefix == "/"
    # The main application's deployments look the Retriever up in the application of this name.
    assert apps[retrieval_app_name("medagent")].route_prefix == RETRIEVE_ROUTE


def test_same_loop_env_reaches_the_request_path_replicas_only() -> None:
    from actors.builder import SAME_LOOP_ENV, serving_deployment_options
    from pipelines.submit import compose_pipeline_config

    for name in ("local", "multi_node"):
        cluster = compose_pipeline_config("run_benchmark", [f"cluster={name}"]).cluster
        assert not cluster.serve.same_loop  # Serve's default unless asked for
        cluster.serve.same_loop = True
        options = serving_deployment_options(cluster)
        for deployment in ("Ingress", "Retriever", "Reranker"):
            env = options[deployment]["ray_actor_options"]["runtime_env"]["env_vars"]
            assert env == SAME_LOOP_ENV, (name, deployment)
        # The LLM replica and the session store (which calls the LLM and may block on it) keep Serve's default.
        for deployment, opts in options.items():
            if deployment not in ("Ingress", "Retriever", "Reranker"):
                assert "runtime_env" not in opts.get("ray_actor_options", {}), (name, deployment)
        cluster.serve.same_loop = False
        assert all(
            "runtime_env" not in o.get("ray_actor_options", {})
            for o in serving_deployment_options(cluster).values()
        )
