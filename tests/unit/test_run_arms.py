"""Every arm in one run, without Ray: the arms compose, a worker runs them interleaved per interview (the
transcript control reads the asking arm's transcript), a rerun skips the pairs already written, and the
paired report compares every arm with the reference arm and names the code that made the rows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

import pipelines.interview_arms as ra
from medagent.config import InterviewEvalConfig
from medagent.history import build_history_agent
from medagent.interview.transcripts import parse_transcript
from tests.fakes import ScriptedChatModel
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever
from tests.unit.test_run_interviews import TEXT, _compose, _evaluator

ARMS = ["single_shot", "single_shot_oracle", "amq", "amq_information", "amq_physician", "amq_no_retrieval",
        "single_shot_amq_transcript"]  # fmt: skip


def test_arms_compose_with_their_overrides_and_order() -> None:
    cfg = _compose("run_interviews", f"arms=[{','.join(ARMS)}]", "+arm_overrides.max_turns=16")
    arms = ra.arm_configs(cfg)
    assert list(arms) == ARMS and all(a.max_turns == 16 for a in arms.values())
    assert arms["amq_information"].questioning.policy == "information"
    assert arms["single_shot_amq_transcript"].single_shot.context == "transcript_run"
    bad = _compose("run_interviews", "arms=[single_shot_amq_transcript,amq]")
    with pytest.raises(ValueError, match="after one"):
        ra.arm_configs(bad)


def _worker(cfg: Any) -> Any:
    from actors.interview_worker import InterviewWorker

    worker = InterviewWorker.__new__(InterviewWorker)  # no Ray: the clients are set by hand
    worker.eval_cfg = InterviewEvalConfig(simulator_exchanges=2)
    worker.llm, worker.embedder = ScriptedChatModel(_evaluator), BagOfWordsEmbedder()
    worker._sem = asyncio.Semaphore(2)
    worker.gold, worker.canonical = {}, None
    worker.arms = {}
    for name, agent in ra.arm_configs(cfg).items():
        agent.max_turns = 3
        clinician = FakeClinician()
        worker.arms[name] = (
            agent,
            build_history_agent(agent, clinician.model, FakeRetriever(), worker.embedder),
        )
    worker.agent_cfg, worker.agent = next(iter(worker.arms.values()))
    return worker


def test_a_multi_arm_run_is_paired_resumable_and_names_its_code(
    tmp_path: Path, data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from medagent.history.evaluation.metrics import BertScorer

    class Scorer:
        def score(self, predictions: list[str], references: list[str]) -> list[float]:
            return [0.5 + 0.001 * len(p) for p in predictions]

    monkeypatch.setattr(BertScorer, "from_config", classmethod(lambda cls, cfg: Scorer()))
    arms = ["single_shot", "single_shot_oracle", "amq", "single_shot_amq_transcript"]
    cfg = _compose("run_interviews", f"arms=[{','.join(arms)}]", f"data_root={data_root}",
                   f"run_dir={tmp_path / 'run'}", "paired_endpoints=[bertscore_f1,n_turns]")  # fmt: skip
    worker = _worker(cfg)
    calls: list[list[str]] = []

    def stream(
        cfg: Any, arms: Any, items: list[dict[str, Any]], endpoints: Any
    ) -> Iterator[list[dict[str, Any]]]:
        for item in items:
            calls.append(json.loads(item["arms"]))
            out = asyncio.run(worker({k: [v] for k, v in item.items()}))
            yield [json.loads(r) | {ra.ARM_KEY: a} for r, a in zip(out["row"], out[ra.ARM_KEY], strict=True)]

    monkeypatch.setattr(ra, "stream_arm_rows", stream)
    monkeypatch.setattr(ra, "ray_session", lambda cluster: nullcontext())
    monkeypatch.setattr(ra, "deploy", lambda needs: type("E", (), {"llm": None, "services": None})())
    monkeypatch.setattr(ra, "load_interviews", lambda *a, **k: type(
        "D", (), {"interviews": [parse_transcript(TEXT, i) for i in ("T1", "T2")], "files": []})())  # fmt: skip
    result = ra.run_arms(cfg)
    assert calls == [arms, arms]  # interleaved: every arm of T1, then every arm of T2
    by = {(p["arm_b"], p["metric"]): p for p in result["paired"]}
    assert set(by) == {(a, m) for a in arms[1:] for m in ("bertscore_f1", "n_turns")}
    assert by[("amq", "n_turns")]["n"] == 2 and by[("amq", "n_turns")]["mean_diff"] == 2
    assert all(p["holm_p"] is not None for p in result["paired"])
    rows = [json.loads(x) for x in (tmp_path / "run/arms/amq/interviews.jsonl").read_text().splitlines()]
    assert {r["git_sha"] for r in rows} == set(result["git_shas"]) and len(rows) == 2
    control = [
        json.loads(x)
        for x in (tmp_path / "run/arms/single_shot_amq_transcript/interviews.jsonl").read_text().splitlines()
    ]
    assert all(r["arm"] == "single_shot:transcript_run" and not r.get("error") for r in control)
    text = (tmp_path / "run/report.md").read_text()
    assert "Holm p" in text and "Primary endpoint: bertscore_f1" in text and "different code" not in text
    # The instrument check opens the report (oracle vs opening-only, on the fact endpoint).
    head = text.split("Primary endpoint")[0]
    assert "Instrument check" in head and "single_shot:full" in head and "single_shot:opening" in head
    # A rerun skips every (interview, arm) pair already written; mixed code is named at the top.
    amq_rows = tmp_path / "run/arms/amq/interviews.jsonl"
    amq_rows.write_text(amq_rows.read_text().replace(rows[0]["git_sha"], "0123abc", 1))
    again = ra.run_arms(cfg)
    assert calls == [arms, arms] and len(again["git_shas"]) == 2
    assert "different code" in (tmp_path / "run/report.md").read_text()
