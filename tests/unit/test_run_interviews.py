"""``run_interviews`` without Ray: its configs compose, a worker turns an endpoint failure into the row's
error, and the report (CSV, figures, markdown, table) is built from evaluated rows of scripted fakes."""

from __future__ import annotations

import asyncio
import csv
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from medagent.config import InterviewEvalConfig, InterviewRunConfig, PatientKind, ServeConfig
from medagent.history import build_history_agent
from medagent.history.evaluation.report import (
    RunRecords,
    format_table,
    pick_timeline,
    scores_figure,
    timeline_figure,
    turns_figure,
    write_csv,
    write_report,
)
from medagent.history.evaluation.runner import evaluate_interview
from medagent.interview.transcripts import parse_transcript
from medagent.llm.base import LLMError
from tests.configs import history_agent_config
from tests.fakes import ScriptedChatModel, completion
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever

CONF = Path(__file__).resolve().parents[2] / "conf"
TEXT = """D: Hello, what brings you in today?
P: I've had a cough and a fever for three days.
D: Any blood when you cough?
P: A little blood this morning.
D: Do you smoke?
P: No, never.
D: OK. So it sounds like this is most likely a chest infection; we will do a chest x-ray and a covid swab and start antibiotics if needed.
P: Thank you.
"""


def _compose(config: str, *overrides: str) -> Any:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="interview_run_schema", node=InterviewRunConfig)
    ConfigStore.instance().store(name="serve_schema", node=ServeConfig)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return OmegaConf.to_object(compose(config_name=config, overrides=list(overrides)))


@pytest.mark.parametrize("agent", ["amq", "single_shot"])
def test_run_interviews_config_composes(agent: str) -> None:
    cfg = _compose("run_interviews", f"history_agent={agent}", "limit=2", "agent.max_turns=4")
    assert isinstance(cfg, InterviewRunConfig) and cfg.agent.mode == agent and cfg.limit == 2
    assert cfg.interviews.prefix == "RES" and cfg.retriever.return_parents and cfg.retriever.mode == "hybrid"
    assert cfg.index_dir.endswith("index/guidelines_demo") and cfg.embedder is not None


def test_serve_config_enables_interview_sessions() -> None:
    cfg = _compose("serve", "interview_sessions.enabled=true", "interview_sessions.agent.max_turns=6")
    assert cfg.interview_sessions.enabled and cfg.interview_sessions.agent.mode == "amq"
    assert cfg.interview_sessions.agent.max_turns == 6 and not _compose("serve").interview_sessions.enabled


def _evaluator(body: dict[str, Any]) -> dict[str, Any]:
    name = body.get("prompt")
    if name == "history_fidelity":
        return completion('{"label": "supported", "rationale": "in the source"}')
    if name == "history_red_flags":
        return completion('{"red_flags": [{"id": "haemoptysis", "quote": "a little blood this morning"}]}')
    return completion("A little blood this morning." if "blood" in json.dumps(body) else "A dry cough.")


def _row(mode: str, iv_id: str) -> dict[str, Any]:
    agent = build_history_agent(
        history_agent_config(mode=mode, max_turns=3),
        FakeClinician().model,
        FakeRetriever(),
        BagOfWordsEmbedder(),
    )
    row = asyncio.run(
        evaluate_interview(
            parse_transcript(TEXT, iv_id),
            agent,
            ScriptedChatModel(_evaluator),
            InterviewEvalConfig(simulator_exchanges=2, patient=PatientKind.simulator),
            embedder=BagOfWordsEmbedder(),
        )
    )
    return json.loads(json.dumps(row.to_dict())) | {"mode": mode, "elapsed_s": 1.5}


class _FakeScorer:
    def score(self, predictions: list[str], references: list[str]) -> list[float]:
        return [0.8 for _ in predictions]


def test_worker_records_an_endpoint_failure_as_the_rows_error(caplog: pytest.LogCaptureFixture) -> None:
    from actors.interview_worker import InterviewWorker

    class Down:
        async def run(self, *_: Any, **__: Any) -> Any:
            raise LLMError("endpoint down")

        cfg = history_agent_config()

    worker = InterviewWorker.__new__(InterviewWorker)  # no Ray: the clients are set by hand
    worker.agent_cfg, worker.eval_cfg = history_agent_config(), InterviewEvalConfig()
    worker.llm, worker.embedder, worker.agent = ScriptedChatModel(_evaluator), BagOfWordsEmbedder(), Down()  # type: ignore[assignment]
    worker._sem = asyncio.Semaphore(1)
    worker.gold, worker.canonical = {}, None
    with caplog.at_level(logging.INFO, logger="actors.interview_worker"):
        out = asyncio.run(worker({"id": ["T1"], "interview": [parse_transcript(TEXT, "T1").to_json()]}))
    row = json.loads(out["row"][0])
    assert out["id"] == ["T1"] and row["error"] == "LLMError: endpoint down" and row["mode"] == "amq"
    # One line when an interview starts and one when it ends, with what happened.
    lines = [r.getMessage() for r in caplog.records if r.name == "actors.interview_worker"]
    assert lines[0] == "interview T1: started (amq)"
    assert re.fullmatch(r"interview T1: LLMError: endpoint down in \d+ s", lines[1])
    assert row["reference"]["usable"]
    with pytest.raises(ValueError, match="InterviewWorker.*interview"):
        asyncio.run(worker({"id": ["T1"]}))


def test_worker_scores_the_differential_against_meditod_gold(
    data_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Gold diagnoses reach the scorer only; the ontology's disease lexicon canonicalises both sides."""
    from actors.interview_worker import InterviewWorker
    from medagent.interview.annotate.vocab import build_disease_lexicon
    from medagent.interview.meditod import gold_diagnoses, load_ontology
    from pipelines.run_interviews import gold_kwargs

    gold = gold_diagnoses(data_root)
    assert gold["317"] == ["covid-19 virus disease"] and set(gold) == {"115", "317", "407"}
    meditod = _compose("run_interviews", "interviews=meditod_sample", f"data_root={data_root}")
    assert gold_kwargs(meditod)["gold_diagnoses"] == gold and gold_kwargs(_compose("run_interviews")) == {}

    worker = InterviewWorker.__new__(InterviewWorker)
    worker.agent_cfg, worker.eval_cfg = (
        history_agent_config(mode="amq", max_turns=3),
        InterviewEvalConfig(simulator_exchanges=2),
    )
    worker.llm, worker.embedder = ScriptedChatModel(_evaluator), BagOfWordsEmbedder()
    worker.agent = build_history_agent(
        worker.agent_cfg, FakeClinician().model, FakeRetriever(), worker.embedder
    )
    worker._sem = asyncio.Semaphore(1)
    worker.canonical = build_disease_lexicon(load_ontology(data_root)).names_in
    hits = {}
    for gold_dx in (["covid-19 virus disease"], ["chronic bronchitis"]):  # the agent says "COVID-19"
        worker.gold = {"T1": gold_dx}
        with caplog.at_level(logging.INFO, logger="actors.interview_worker"):
            out = asyncio.run(worker({"id": ["T1"], "interview": [parse_transcript(TEXT, "T1").to_json()]}))
        rec = json.loads(out["row"][0])["record"]
        assert rec["gold_diagnoses"] == gold_dx
        hits[gold_dx[0]] = rec["differential_hit"]
    assert hits == {"covid-19 virus disease": True, "chronic bronchitis": False}
    done = [r.getMessage() for r in caplog.records if "started" not in r.getMessage()]
    assert len(done) == 2 and all(
        re.fullmatch(r"interview T1: 3 turns \(turn budget \(3\) spent\) in \d+ s", m) for m in done
    ), done


def test_report_from_rows(tmp_path: Path) -> None:
    from medagent.history.evaluation.metrics import add_bertscore

    error = {"interview_id": "T3", "mode": "amq", "error": "LLMError: down", "reference": {"usable": True}}
    skipped = {"interview_id": "T4", "mode": "amq", "skipped": "no usable closing statement"}
    amq = RunRecords.from_rows("amq", [_row("amq", "T1"), _row("amq", "T2"), error, skipped])
    base = RunRecords.from_rows("single_shot", [_row("single_shot", "T1")])
    for run in (amq, base):
        add_bertscore(run.records, _FakeScorer())  # type: ignore[arg-type]
    m = amq.metrics()
    assert m["n"] == 3 and m["errors"] == 1 and m["skipped"] == 1 and m["bertscore_f1"] == 0.8
    assert m["turns_mean"] == 3 and m["seconds_mean"] == 1.5 and m["llm_calls_mean"] > 3
    assert base.metrics()["turns_mean"] == 1
    # Where the time goes: per kind of call, means over the 2 scored interviews (the failed one adds nothing).
    by_kind = m["llm_time_by_kind"]
    assert {"question", "update", "patient", "fidelity judge", "red flags", "assessment"} <= set(by_kind)
    assert by_kind["fidelity judge"]["calls"] == 3 and by_kind["patient"]["calls"] == 3  # one per answer

    write_csv(amq, tmp_path / "interviews.csv")
    with open(tmp_path / "interviews.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["interview_id"] for r in rows] == ["T1", "T2", "T3"] and rows[2]["error"] == "LLMError: down"
    row = pick_timeline(amq)
    assert row is not None and row["interview_id"] in ("T1", "T2")
    figures = [
        scores_figure([amq, base], tmp_path / "scores.png"),
        turns_figure([amq, base], tmp_path / "turns.png"),
        timeline_figure(row, tmp_path / "timeline.png"),
    ]
    assert all(p is not None and p.stat().st_size > 1000 for p in figures)
    text = write_report(
        [amq, base], [amq.metrics(), base.metrics()], [p for p in figures if p], tmp_path / "r.md", title="t"
    )
    assert "| amq | 3 | 1 | 1 |" in text and "| single_shot |" in text and "T3: LLMError" in text
    assert "![timeline](figures/timeline.png)" in text and "ROUGE-L" in text
    assert "| amq | update | 3.0 |" in text and "| single_shot | single-shot summary | 1.0 |" in text
    assert format_table([("amq", m)]).count("\n") == 2


def test_interview_resumable_keys_name_real_fields() -> None:
    from dataclasses import asdict

    from medagent.config import InterviewRunConfig
    from medagent.run import config_drift
    from pipelines.run_interviews import RESUMABLE_KEYS

    fields = asdict(InterviewRunConfig())
    for key in RESUMABLE_KEYS:
        if "*" in key:
            continue
        node: object = fields
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, key
            node = node[part]
    changed = asdict(InterviewRunConfig(limit=3, progress=False))
    assert config_drift(fields, changed, RESUMABLE_KEYS) == []
    changed["agent"]["max_turns"] = fields["agent"]["max_turns"] + 1
    assert config_drift(fields, changed, RESUMABLE_KEYS) == ["agent.max_turns"]


def test_interview_row_reads_and_writes_the_run_dir_keys() -> None:
    from medagent.history.evaluation.row import InterviewRow

    scored = _row("amq", "T1")
    skipped = {"interview_id": "T9", "source": "osce", "reference": {"usable": False}, "skipped": "why"}
    error = {"interview_id": "T8", "source": "osce", "mode": "amq", "reference": {}, "error": "LLMError: x"}
    for d in (scored, skipped, error, scored | {"from_a_later_version": 1}):
        assert InterviewRow.from_dict(d).to_dict() == d
    assert InterviewRow.from_dict(scored).scored and not InterviewRow.from_dict(skipped).scored
    assert InterviewRow.from_dict(error).outcome() == "LLMError: x"


def _flat_history_agent(agent: dict[str, Any]) -> dict[str, Any]:
    """The agent section as interview run dirs made before its groups recorded it (former key names)."""
    from medagent.config.legacy import HISTORY_AGENT_MOVES

    groups = {new.split(".")[0] for new in HISTORY_AGENT_MOVES.values()}
    flat = {k: v for k, v in agent.items() if k not in groups}
    for key, new in HISTORY_AGENT_MOVES.items():
        group, leaf = new.split(".")
        flat[key] = agent[group][leaf]
    return flat


def test_interview_run_dirs_with_the_flat_agent_keys_still_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import asdict

    import pipelines.run_interviews as ri
    from medagent.config.legacy import upgrade_history_config
    from medagent.interview.sources import InterviewSet
    from medagent.run import ConfigDriftError, RunDir

    interviews = [parse_transcript(TEXT, "T1")]
    monkeypatch.setattr(ri, "load_interviews", lambda *a, **k: InterviewSet("t", interviews, []))
    monkeypatch.setattr(ri, "_interview_with_ray", lambda *a: None)  # nothing left to run: T1 is done
    monkeypatch.setattr(ri, "report", lambda *a: {"resumed": True})
    cfg = InterviewRunConfig(run_dir=str(tmp_path / "run"), agent=history_agent_config(max_turns=3))
    rd = RunDir.create(cfg.run_dir, str(tmp_path), "x")
    rd.append_records(rd.interviews, [_row("amq", "T1")], key="interview_id")
    assert ri.run(cfg) == {"resumed": True}
    manifest = rd.read_json(rd.manifest)
    nested = manifest["config"]["agent"]
    manifest["config"]["agent"] = _flat_history_agent(nested)
    assert manifest["config"]["agent"]["similarity_threshold"] == 0.75  # a former key
    assert upgrade_history_config(manifest["config"]) == json.loads(json.dumps(asdict(cfg), default=str))
    rd.write_json(rd.manifest, manifest)
    assert ri.run(cfg) == {"resumed": True}  # resumed: the old keys were read into the groups
    cfg.agent.generation.max_tokens_summary = 64
    with pytest.raises(ConfigDriftError, match=r"agent\.generation\.max_tokens_summary: 384 -> 64"):
        ri.run(cfg)


def test_report_only_scores_the_interviews_run_and_runs_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import pipelines.run_interviews as ri
    from medagent.interview.sources import InterviewSet
    from medagent.run import RunDir

    interviews = [parse_transcript(TEXT, i) for i in ("T1", "T2")]
    ran: list[list[str]] = []
    monkeypatch.setattr(ri, "load_interviews", lambda *a, **k: InterviewSet("t", interviews, []))
    monkeypatch.setattr(ri, "_interview_with_ray", lambda cfg, todo, rd: ran.append([iv.id for iv in todo]))
    monkeypatch.setattr(ri, "report", lambda cfg, rd, ivs: {"reported": len(ivs)})
    cfg = InterviewRunConfig(run_dir=str(tmp_path / "run"), agent=history_agent_config(max_turns=3))
    rd = RunDir.create(cfg.run_dir, str(tmp_path), "x")
    rd.append_records(rd.interviews, [_row("amq", "T1")], key="interview_id")
    ri.run(cfg)
    assert ran == [["T2"]]  # T1 is done, T2 to go
    cfg.report_only = True  # the run dir made without it resumes under it (it changes no row)
    with caplog.at_level("WARNING"):
        assert ri.run(cfg) == {"reported": 2}
    assert ran == [["T2"]]
    assert "report_only: 1 interviews not run; the report covers the 1 already run" in caplog.text
