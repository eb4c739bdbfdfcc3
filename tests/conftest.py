from __future__ import annotations

import faulthandler
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# No hub here or in CI: a missing local model must fail fast.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]

# The last resort against a hang that pytest-timeout cannot break: its SIGALRM only fires between Python
# bytecodes of the main thread and it arms one timer per test, so a test blocked in C code, or a teardown
# that hangs after that timer fired, would otherwise hold CI until its global limit with nothing printed. This watchdog runs
# in faulthandler's own C thread: past the limit it prints every thread's stack and ends the session.
# A little over `make test`'s --timeout=900, which bounds setup, call and teardown of each test: every
# minute above that is a minute of CI's 90 a hang may burn before anyone sees a stack.
WATCHDOG_S = float(os.environ.get("MEDAGENT_TEST_WATCHDOG_S", "1020"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if WATCHDOG_S > 0:
        faulthandler.dump_traceback_later(WATCHDOG_S, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        if WATCHDOG_S > 0:
            faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def data_root() -> Path:
    from medagent.data import resolve_data_root

    try:
        return resolve_data_root(None)
    except FileNotFoundError:
        pytest.skip("shared data root not found (set MEDAGENT_DATA)")
