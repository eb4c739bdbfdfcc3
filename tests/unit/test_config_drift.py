"""Resuming a run dir under other settings is refused (``medagent.run.drift``, ``benchmark_run.run``)."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from medagent.config import BenchmarkConfig, RunConfig
from medagent.config.legacy import AGENT_MOVES, upgrade_config
from medagent.run import ConfigDriftError, RunDir, check_resume, config_drift
from medagent.types import Prediction, Question
from pipelines.benchmark_run import RESUMABLE_KEYS, run

PREVIOUS = {
    "seed": 0,
    "limit": 20,
    "agent": {"mode": "full", "top_r": 8, "retrieval_sources": None},
    "reranker": {"name": "mpnet-cpu", "model": {"name": "mpnet", "local_path": None}},
    "cluster": {"name": "local", "workers": {"count": 1}},
    "index_dir": "/work/outputs/index/cpu_default",
    "open_scoring": {"embedders": [{"name": "a"}, {"name": "b"}]},
}


def _changed(**changes: object) -> dict[str, object]:
    """PREVIOUS with dotted keys replaced (a deep copy)."""
    out = json.loads(json.dumps(PREVIOUS))
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = out
        for p in parents:
            node = node[p]
        node[leaf] = value
    return out


def test_same_config_has_no_drift() -> None:
    assert config_drift(PREVIOUS, _changed()) == []


def test_drift_names_nested_and_list_keys() -> None:
    current = _changed(agent__top_r=32, reranker__name="gte-qwen2-7b-4bit", seed=1)
    current["open_scoring"]["embedders"][1]["name"] = "c"  # type: ignore[index]
    assert config_drift(PREVIOUS, current) == [
        "agent.top_r",
        "open_scoring.embedders.1.name",
        "reranker.name",
        "seed",
    ]


def test_a_key_on_one_side_only_is_drift() -> None:
    current = _changed()
    current["agent"]["top_k"] = 32  # type: ignore[index]
    del current["seed"]
    assert config_drift(PREVIOUS, current) == ["agent.top_k", "seed"]
    assert config_drift({"x": {}}, {"x": {"a": 1}}) == ["x", "x.a"]


def test_an_older_runs_flat_cluster_section_resumes() -> None:
    # The cluster's settings were flat keys before its groups; the cluster is resumable, so nothing moves them.
    older = {**PREVIOUS, "cluster": {"name": "local", "num_workers": 1, "http_port": 8000, "llm_replicas": 1}}
    assert config_drift(older, PREVIOUS, RESUMABLE_KEYS) == []


def test_ignore_takes_exact_keys_subtrees_and_globs() -> None:
    current = _changed(
        limit=None,
        cluster__name="multi_gpu",
        cluster__workers__count=16,
        index_dir="/mnt/shared/index/cpu_default",
        reranker__model__local_path="/mnt/shared/models/mpnet",
    )
    assert config_drift(PREVIOUS, current) == [
        "cluster.name",
        "cluster.workers.count",
        "index_dir",
        "limit",
        "reranker.model.local_path",
    ]
    assert config_drift(PREVIOUS, current, {"limit", "cluster", "index_dir", "*.local_path"}) == []
    # A prefix of a key's name is not its parent: "agent.top" ignores neither top_r nor top_k.
    assert config_drift(PREVIOUS, _changed(agent__top_r=32), {"agent.top"}) == ["agent.top_r"]


def test_check_resume_needs_answers_and_a_previous_config() -> None:
    other = _changed(seed=7)
    check_resume(None, other, (), run_dir="/r", answered=5)  # a new run dir
    check_resume({"config": PREVIOUS}, other, (), run_dir="/r", answered=0)  # nothing answered yet
    check_resume({"history": []}, other, (), run_dir="/r", answered=5)  # a manifest without config
    with pytest.raises(ConfigDriftError) as err:
        check_resume({"config": PREVIOUS}, other, (), run_dir="/r", answered=5)
    message = str(err.value)
    assert "run_dir=/r already holds 5 answers" in message
    assert "seed: 0 -> 7" in message and "another run_dir" in message and "resume_check=false" in message


# benchmark_run.run with a fake answerer in place of Ray (it answers "A" to what it is given).
@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patches the Ray part of ``run``; the list holds how many questions each call answered."""
    import pipelines.benchmark_run as rb

    calls: list[int] = []

    def fake(cfg: RunConfig, todo: list[Question], rd: RunDir, endpoints: object = None) -> None:
        calls.append(len(todo))
        rd.append_predictions([Prediction(id=q.id, benchmark=cfg.benchmark.name, answer="A") for q in todo])

    monkeypatch.setattr(rb, "_answer_with_ray", fake)
    return calls


def _first_run(tmp_path: Path) -> RunConfig:
    """A run of 3 questions, every one answered (correctly); returns its config for the rerun."""
    rows = [
        {"id": f"q{i}", "question": f"Question {i}?", "options": {"A": "yes", "B": "no"}, "answer": "A"}
        for i in range(3)
    ]
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = RunConfig(
        benchmark=BenchmarkConfig(name="toy", loader="jsonl", options={"path": str(data)}),
        run_dir=str(tmp_path / "run"),
        bootstrap_samples=10,
        progress=False,
        show_example=False,
    )
    assert run(cfg)["accuracy"] == 1.0
    return cfg


def test_run_resumes_when_only_resumable_keys_changed(tmp_path: Path, answered: list[int]) -> None:
    cfg = _first_run(tmp_path)
    cfg.limit, cfg.cluster.name, cfg.cluster.workers.count, cfg.max_error_rate = 3, "multi_gpu", 16, 0.5
    assert run(cfg)["accuracy"] == 1.0
    assert answered == [3]  # the rerun had nothing left to answer
    manifest = RunDir(str(cfg.run_dir)).read_json(RunDir(str(cfg.run_dir)).manifest)
    assert manifest["config"]["cluster"]["name"] == "multi_gpu" and len(manifest["history"]) == 2


def test_run_refuses_a_resume_under_other_settings(tmp_path: Path, answered: list[int]) -> None:
    cfg = _first_run(tmp_path)
    rd = RunDir(str(cfg.run_dir))
    before = rd.manifest.read_text(encoding="utf-8")
    cfg.agent.retrieval.top_r, cfg.reranker.name = 8, "gte-qwen2-7b-4bit"
    with pytest.raises(ConfigDriftError, match=r"agent\.retrieval\.top_r: 32 -> 8[\s\S]*reranker\.name"):
        run(cfg)
    assert rd.manifest.read_text(encoding="utf-8") == before  # refused before anything was written
    cfg.resume_check = False
    assert run(cfg)["accuracy"] == 1.0
    assert rd.read_json(rd.manifest)["config"]["reranker"]["name"] == "gte-qwen2-7b-4bit"


def _flat_agent(agent: dict[str, Any]) -> dict[str, Any]:
    """The agent section as run dirs made before its groups recorded it (one level, former key names)."""
    old = {new: key for key, new in AGENT_MOVES.items()}
    flat = {k: v for k, v in agent.items() if k not in {p.split(".")[0] for p in old}}
    for new, key in old.items():
        group, leaf = new.split(".")
        flat[key] = agent[group][leaf]
    return flat


def test_run_dirs_with_the_flat_agent_keys_still_resume(tmp_path: Path, answered: list[int]) -> None:
    cfg = _first_run(tmp_path)
    rd = RunDir(str(cfg.run_dir))
    manifest = rd.read_json(rd.manifest)
    nested = manifest["config"]["agent"]
    manifest["config"]["agent"] = _flat_agent(nested)
    assert upgrade_config(manifest["config"])["agent"] == nested
    rd.write_json(rd.manifest, manifest)
    assert run(cfg)["accuracy"] == 1.0  # resumed: the old keys were read into the groups
    cfg.agent.retrieval.top_r = 8
    with pytest.raises(ConfigDriftError, match=r"agent\.retrieval\.top_r: 32 -> 8"):
        run(cfg)


def test_resumable_keys_exist_in_the_run_config() -> None:
    """A typo in RESUMABLE_KEYS would silently check the key it meant to allow."""
    flat = set(_flat_keys(asdict(RunConfig())))
    for pattern in RESUMABLE_KEYS:
        if pattern.startswith("*."):
            continue
        assert pattern in flat or any(k.startswith(pattern + ".") for k in flat), pattern


def _flat_keys(d: dict[str, object], prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        out.append(key)
        if isinstance(v, dict):
            out += _flat_keys(v, key + ".")
    return out


def _index(root: Path, text: str) -> Path:
    from tests.unit._retrieval_fakes import build_tiny_index

    build_tiny_index(root, {"notes": [{"id": "n1", "title": "Scurvy", "content": text}]})
    return root


def test_a_resume_against_another_index_is_refused_but_a_moved_index_is_not(
    tmp_path: Path, answered: list[int]
) -> None:
    index_a = _index(tmp_path / "index_a", "Vitamin C deficiency causes bleeding gums.")
    cfg = _first_run_searching(tmp_path, index_a)
    rd = RunDir(str(cfg.run_dir))
    recorded = rd.read_json(rd.manifest)["config"]["index_fingerprint"]
    manifest_bytes = (index_a / "manifest.json").read_bytes()
    assert recorded["manifest_sha256"] == hashlib.sha256(manifest_bytes).hexdigest()
    assert recorded["chunks"] == {"notes": 1}

    # The same index at another path (another machine's mount): the path spelling is resumable.
    moved = tmp_path / "mnt" / "shared" / "index_a"
    shutil.copytree(index_a, moved)
    cfg.index_dir = str(moved)
    assert run(cfg)["accuracy"] == 1.0 and answered == [3, 3]  # nothing re-answered

    # Another index under the first one's path: refused, naming the fingerprint's keys.
    index_b = _index(tmp_path / "index_b", "Vitamin D deficiency in children causes rickets. " * 20)
    shutil.rmtree(moved)
    shutil.copytree(index_b, moved)
    before = rd.manifest.read_text(encoding="utf-8")
    with pytest.raises(ConfigDriftError) as err:
        run(cfg)
    message = str(err.value)
    assert (
        "index_fingerprint.manifest_sha256" in message and "index_fingerprint.chunks.notes: 1 -> " in message
    )
    assert "index_dir" not in message.split("Differing keys")[1]  # the path itself is not what differs
    assert rd.manifest.read_text(encoding="utf-8") == before and answered == [3, 3]


def _first_run_searching(tmp_path: Path, index_dir: Path) -> RunConfig:
    """``_first_run`` with a searching agent over ``index_dir`` (the fake answerer needs no retriever)."""
    cfg = _first_run(tmp_path)  # standalone: recorded without a fingerprint
    cfg.agent.mode, cfg.index_dir, cfg.run_dir = "full", str(index_dir), str(tmp_path / "searching")
    assert run(cfg)["accuracy"] == 1.0
    return cfg
