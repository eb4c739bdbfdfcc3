"""The generic registry (medagent.registry) and the import order it allows: no cycles, no lazy imports."""

import subprocess
import sys

import pytest

from medagent.registry import Registry


def test_registry_add_get_and_errors() -> None:
    reg: Registry[int] = Registry("thing")
    reg.add("a", 1)
    reg.register("b")(2)
    assert reg.get("a") == 1 and reg.names() == ["a", "b"] and "b" in reg
    reg.add("a", 1)  # the same object again (a module imported twice) is fine
    with pytest.raises(ValueError, match="already registered"):
        reg.add("a", 3)
    with pytest.raises(KeyError, match="unknown thing 'c'; registered: a, b"):
        reg.get("c")


@pytest.mark.parametrize(
    "module", ["medagent.data.loaders", "medagent.retrieval.readers", "medagent.retrieval.jats"]
)
def test_a_registering_module_imports_first_without_a_cycle(module: str) -> None:
    # Importing a reader or loader module first (before its registry) used to go through a lazy cycle.
    code = (
        f"import {module}\n"
        "from medagent.data import list_benchmarks\nfrom medagent.retrieval.corpus import list_readers\n"
        "assert 'medqa' in list_benchmarks() and 'pubmedqa' in list_readers()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
