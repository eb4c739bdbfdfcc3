"""Loading and validating the cluster manifests (shared by tests/unit/test_cluster_manifests.py).

Three validators, none of which needs a cluster or the network:
- core Kubernetes objects, and every pod template inside the KubeRay objects wrapped as a core
  ``v1 PodTemplate``: kubernetes-validate's bundled Kubernetes JSON schemas, strict (unknown fields fail);
- the KubeRay objects themselves: our schema written from KubeRay's v1 API reference
  (cluster/schemas/kuberay-v1.schema.json), since no PyPI package ships KubeRay's CRDs;
- optionally KubeRay's own CRDs (``kubectl get crd rayclusters.ray.io -o yaml > <dir>/rayclusters.yaml`` ...)
  from the folder in ``$MEDAGENT_KUBERAY_CRDS``, made strict the way ``kubectl apply`` with server-side field
  validation is (unknown fields fail unless the schema preserves them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "cluster"
KUBERAY_DIR = CLUSTER / "kuberay"
LAUNCHER_DIR = CLUSTER / "launcher"
SCHEMA = CLUSTER / "schemas" / "kuberay-v1.schema.json"
# Oldest and newest Kubernetes minor versions the manifests are checked against.
K8S_VERSIONS = ("1.29", "1.37")
KUBERAY_KINDS = ("RayCluster", "RayJob", "RayService")
CRDS_ENV = "MEDAGENT_KUBERAY_CRDS"


def manifest_files() -> list[Path]:
    return sorted(KUBERAY_DIR.glob("*.yaml"))


def load_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def all_documents() -> list[tuple[str, dict[str, Any]]]:
    """``(file name, object)`` for every object of every manifest."""
    return [(path.name, doc) for path in manifest_files() for doc in load_documents(path)]


def is_kuberay(doc: dict[str, Any]) -> bool:
    return str(doc.get("apiVersion", "")).startswith("ray.io/")


def cluster_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The RayClusterSpec inside a RayCluster, RayJob or RayService (None for a RayJob using a selector)."""
    spec = doc["spec"]
    return {
        "RayCluster": spec,
        "RayJob": spec.get("rayClusterSpec"),
        "RayService": spec.get("rayClusterConfig"),
    }[doc["kind"]]


def pod_templates(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(JSON-path-like location, PodTemplateSpec)`` of every pod a KubeRay object creates."""
    spec = cluster_spec(doc)
    prefix = {"RayCluster": "spec", "RayJob": "spec.rayClusterSpec", "RayService": "spec.rayClusterConfig"}[
        doc["kind"]
    ]
    if spec is not None:
        yield f"{prefix}.headGroupSpec.template", spec["headGroupSpec"]["template"]
        for group in spec.get("workerGroupSpecs", []):
            yield f"{prefix}.workerGroupSpecs[{group['groupName']}].template", group["template"]
    if doc["kind"] == "RayJob" and "submitterPodTemplate" in doc["spec"]:
        yield "spec.submitterPodTemplate", doc["spec"]["submitterPodTemplate"]


def as_pod_template(name: str, template: dict[str, Any]) -> dict[str, Any]:
    """A core ``v1 PodTemplate`` object holding ``template``, so Kubernetes' schema checks all of it."""
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name}, "template": template}


def kuberay_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def schema_errors(validator: jsonschema.protocols.Validator, doc: dict[str, Any]) -> list[str]:
    return [
        f"{'/'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
        for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    ]


# KubeRay's own CRDs (optional) ----------------------------------------------------------------------------


def strict_crd_schema(node: Any) -> Any:
    """An openAPIV3Schema with unknown fields refused wherever the CRD does not preserve them.

    The API server prunes (or, with strict field validation, rejects) fields a structural schema does not
    declare; plain JSON-schema validation would accept them, so we add ``additionalProperties: false``.
    """
    if isinstance(node, list):
        return [strict_crd_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: strict_crd_schema(value) for key, value in node.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def load_crd_schemas(folder: Path, version: str = "v1") -> dict[str, dict[str, Any]]:
    """kind -> strict openAPIV3Schema of ``version`` from every CRD YAML in ``folder``."""
    schemas: dict[str, dict[str, Any]] = {}
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml"), *folder.glob("*.json")]):
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        # `kubectl get crd a b c -o yaml` writes one List; one CRD per file works too.
        docs = [item for d in docs for item in (d.get("items", []) if d.get("kind") == "List" else [d])]
        for doc in docs:
            if doc.get("kind") != "CustomResourceDefinition":
                continue
            for entry in doc["spec"]["versions"]:
                if entry["name"] == version:
                    schema = entry["schema"]["openAPIV3Schema"]
                    schemas[doc["spec"]["names"]["kind"]] = strict_crd_schema(schema)
    return schemas


def crd_folder() -> Path | None:
    value = os.environ.get(CRDS_ENV)
    return Path(value) if value else None


def launcher_files() -> list[Path]:
    return sorted(LAUNCHER_DIR.glob("*.yaml"))
