"""Integrity checks of model files (shared by reassembly and conversion)."""

from __future__ import annotations

import hashlib
from pathlib import Path

_CHUNK = 1 << 22


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
    return h.hexdigest()
