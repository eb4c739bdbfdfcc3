"""Barber modularity: reference partitions, published maxima, analytic cases, Newman contrast (§1.2)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from medagent.network.modularity import barber_q, count_modules, maximise_barber_q, newman_q_bipartite
from tests.unit._netref import expected, needs_netref, read_matrix, read_partition


@needs_netref
@pytest.mark.parametrize("kind", ["binary", "weighted"])
def test_reference_partition_q(kind: str) -> None:
    ref = expected()["barber_modularity"][f"Safariland_{kind}"]
    rows, cols, M = read_matrix("Safariland.csv")
    W = M if kind == "weighted" else (M > 0).astype(float)
    rl, cl = read_partition(ref["partition"], rows, cols)
    assert barber_q(W, rl, cl) == pytest.approx(ref["Q"], abs=1e-9)
    assert count_modules(W, rl, cl) == ref["modules"]


@needs_netref
@pytest.mark.parametrize("kind", ["binary", "weighted"])
def test_optimiser_reaches_published_maximum(kind: str) -> None:
    ref = expected()["barber_modularity"][f"Safariland_{kind}"]
    _, _, M = read_matrix("Safariland.csv")
    best = maximise_barber_q(M, weighted=kind == "weighted", restarts=10, seed=0)
    assert ref["Q"] - 1e-9 <= best.Q
    assert best.modules == ref["modules"]
    # The reported Q is ours, recomputed from the partition.
    W = M if kind == "weighted" else (M > 0).astype(float)
    assert barber_q(W, best.row_labels, best.col_labels) == best.Q


@needs_netref
def test_barber_above_newman_on_safariland() -> None:
    rows, cols, M = read_matrix("Safariland.csv")
    B = (M > 0).astype(float)
    rl, cl = read_partition("partition_Safariland_binary.csv", rows, cols)
    qn = newman_q_bipartite(B, rl, cl)
    assert qn == pytest.approx(0.54701, abs=5e-6)  # METHODS.md table: networkx on the same partition
    G = nx.Graph()
    G.add_edges_from((f"r{i}", f"c{j}") for i, j in zip(*np.nonzero(B), strict=True))
    comms: dict[int, set[str]] = {}
    for i, m in enumerate(rl):
        comms.setdefault(m, set()).add(f"r{i}")
    for j, m in enumerate(cl):
        comms.setdefault(m, set()).add(f"c{j}")
    assert nx.community.modularity(G, list(comms.values())) == pytest.approx(qn, abs=1e-12)
    assert barber_q(B, rl, cl) > qn


def _bicliques(c: int, h: int, w: int) -> tuple[np.ndarray, list[int], list[int]]:
    B = np.kron(np.eye(c), np.ones((h, w)))
    return B, [i // h for i in range(c * h)], [j // w for j in range(c * w)]


@pytest.mark.parametrize("c", [1, 2, 4, 8])
def test_upper_bound_for_equal_bicliques(c: int) -> None:
    B, rl, cl = _bicliques(c, 3, 4)
    assert barber_q(B, rl, cl) == pytest.approx(1 - 1 / c, abs=1e-12)
    best = maximise_barber_q(B, weighted=False, restarts=3)
    assert pytest.approx(1 - 1 / c, abs=1e-12) == best.Q and best.modules == c


def test_single_module_is_zero_and_labels_are_arbitrary() -> None:
    rng = np.random.default_rng(3)
    B = (rng.random((12, 9)) < 0.3).astype(float)
    assert barber_q(B, [0] * 12, [0] * 9) == pytest.approx(0.0, abs=1e-12)
    rl = rng.integers(0, 3, 12).tolist()
    cl = rng.integers(0, 3, 9).tolist()
    rename = {0: "x", 1: "y", 2: "z"}
    assert barber_q(B, rl, cl) == pytest.approx(barber_q(B, [rename[x] for x in rl], [rename[x] for x in cl]))


def test_newman_never_above_barber_and_equal_when_margins_match() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        B = rng.random((10, 8)) * (rng.random((10, 8)) < 0.4)
        rl, cl = rng.integers(0, 3, 10).tolist(), rng.integers(0, 3, 8).tolist()
        assert newman_q_bipartite(B, rl, cl) <= barber_q(B, rl, cl) + 1e-12
    B, rl, cl = _bicliques(3, 2, 2)  # R_c = C_c in every module
    assert newman_q_bipartite(B, rl, cl) == pytest.approx(barber_q(B, rl, cl), abs=1e-12)


def test_isolated_nodes_are_not_modules() -> None:
    B = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0]], dtype=float)
    assert count_modules(B, [0, 1, 2], [0, 1, 3]) == 2
    best = maximise_barber_q(B, weighted=False, restarts=2)
    assert best.modules == 2 and pytest.approx(0.5) == best.Q


@needs_netref
def test_networkx_newman_reference_values() -> None:
    # Newman's modularity (one-mode) from networkx's own docs: a contrast, never our Q_B.
    ref = expected()["networkx_docs"]
    G = nx.barbell_graph(3, 0)
    assert nx.community.modularity(G, ref["barbell_3_0_modularity"]["partition"]) == pytest.approx(
        ref["barbell_3_0_modularity"]["Q"], abs=1e-12
    )
    assert nx.community.modularity(G, ref["barbell_3_0_bad"]["partition"]) == pytest.approx(
        ref["barbell_3_0_bad"]["Q"], abs=1e-12
    )
    comms = nx.community.louvain_communities(nx.petersen_graph(), seed=123)
    assert sorted(sorted(c) for c in comms) == sorted(ref["petersen_louvain_seed123"])
