from __future__ import annotations

import os
from pathlib import Path

import pytest

# No hub here or in CI: a missing local model must fail fast.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def data_root() -> Path:
    from medagent.data import resolve_data_root

    try:
        return resolve_data_root(None)
    except FileNotFoundError:
        pytest.skip("shared data root not found (set MEDAGENT_DATA)")
