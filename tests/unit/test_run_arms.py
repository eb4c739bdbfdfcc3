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


def _fake_ray(cfg: Any, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """``run_arms`` without Ray: each item goes straight to a worker on scripted fakes, BERTScore is a length
    rule and two copies of one transcript are the interviews. Returns the arms of each item, as run."""
    from medagent.history.evaluation.metrics import BertScorer

    class Scorer:
        def score(self, predictions: list[str], references: list[str]) -> list[float]:
            return [0.5 + 0.001 * len(p) for p in predictions]

    monkeypatch.setattr(BertScorer, "from_config", classmethod(lambda cls, cfg: Scorer()))
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
    return calls


def test_a_multi_arm_run_is_paired_resumable_and_names_its_code(
    tmp_path: Path, data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arms = ["single_shot", "single_shot_oracle", "amq", "single_shot_amq_transcript"]
    cfg = _compose("run_interviews", f"arms=[{','.join(arms)}]", f"data_root={data_root}",
                   f"run_dir={tmp_path / 'run'}", "paired_endpoints=[bertscore_f1,n_turns]")  # fmt: skip
    calls = _fake_ray(cfg, monkeypatch)
    result = ra.run_arms(cfg)
    # Interleaved: every arm of T1, then every arm of T2, one item per arm (each pair is written when it
    # ends); the transcript control rides with the asking arm whose transcript it reads.
    per_interview = [["single_shot"], ["single_shot_oracle"], ["amq", "single_shot_amq_transcript"]]
    assert calls == per_interview * 2
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
    arm_report = (tmp_path / "run/arms/amq/report.md").read_text()
    assert "Instrument check" not in arm_report and "../../report.md" in arm_report
    head = text.split("Primary endpoint")[0]
    assert "Instrument check" in head and "single_shot:full" in head and "single_shot:opening" in head
    # A rerun skips every (interview, arm) pair already written; mixed code is named at the top.
    amq_rows = tmp_path / "run/arms/amq/interviews.jsonl"
    amq_rows.write_text(amq_rows.read_text().replace(rows[0]["git_sha"], "0123abc", 1))
    again = ra.run_arms(cfg)
    assert calls == per_interview * 2 and len(again["git_shas"]) == 2
    assert "different code" in (tmp_path / "run/report.md").read_text()


def test_report_only_reports_the_pairs_written_and_runs_none(
    tmp_path: Path, data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _compose("run_interviews", "arms=[single_shot,amq]", f"data_root={data_root}",
                   f"run_dir={tmp_path / 'run'}", "paired_endpoints=[n_turns]")  # fmt: skip
    calls = _fake_ray(cfg, monkeypatch)
    ra.run_arms(cfg)
    assert "Interim report" not in (tmp_path / "run/report.md").read_text()
    amq = tmp_path / "run/arms/amq/interviews.jsonl"
    amq.write_text(amq.read_text().splitlines()[0] + "\n")  # as if stopped before amq finished T2
    ran = len(calls)
    cfg.report_only = True
    result = ra.run_arms(cfg)
    assert len(calls) == ran  # nothing ran
    assert [(p["arm_b"], p["n"]) for p in result["paired"]] == [("amq", 1)]
    assert (
        "**Interim report: 3 (interview, arm) pairs written, 1 still to run.**"
        in (tmp_path / "run/report.md").read_text()
    )


class _Done:
    """A per-arm run dir as ``todo_items`` reads it: the interviews done, and the asking arm's rows."""

    def __init__(self, ids: set[str], rows: list[dict[str, Any]] | None = None) -> None:
        self.ids, self.rows, self.interviews = ids, rows or [], "interviews.jsonl"

    def completed_keys(self, *_: Any) -> set[str]:
        return self.ids

    def latest_records(self, *_: Any) -> list[dict[str, Any]]:
        return self.rows


def test_each_pair_is_its_own_item_and_the_control_rides_with_or_reads_the_first_asking_arm() -> None:
    from medagent.history.agent.state import AskedQuestion, InterviewState

    cfg = _compose("run_interviews", f"arms=[{','.join(ARMS)}]")
    arms = ra.arm_configs(cfg)
    interviews = [parse_transcript(TEXT, i) for i in ("T1", "T2")]
    dirs: dict[str, Any] = {name: _Done(set()) for name in ARMS}
    items = ra.todo_items(arms, dirs, interviews)
    got = [(i["id"], json.loads(i["arms"]), i["transcript"]) for i in items]
    one = [[a] for a in ARMS[2:-1]]
    per = [["single_shot"], ["single_shot_oracle"], ["amq", "single_shot_amq_transcript"], *one[1:]]
    assert got == [(iv, arms_, "") for iv in ("T1", "T2") for arms_ in per]

    # amq finished T1 in an earlier attempt: the control runs alone on amq's transcript from then.
    state = InterviewState(asked=(AskedQuestion(0, "Any cough?", "symptom", "triage", answer="Yes, dry."),))
    from medagent.history.evaluation.row import InterviewRow

    row = InterviewRow.from_dict(_row_for("T1", state.to_dict()))
    dirs["amq"] = _Done({"T1"}, [row.to_dict()])
    for name in ARMS[:2]:
        dirs[name] = _Done({"T1", "T2"})
    items = ra.todo_items(arms, dirs, interviews)
    t1 = [(json.loads(i["arms"]), i["transcript"]) for i in items if i["id"] == "T1"]
    assert t1 == [
        *[(a, "") for a in one[1:]],
        (["single_shot_amq_transcript"], "Doctor: Any cough?\nPatient: Yes, dry."),
    ]


def _row_for(interview_id: str, final_state: dict[str, Any]) -> dict[str, Any]:
    from tests.unit.test_run_interviews import _row

    row = _row("amq", interview_id)
    row["result"]["final_state"] = final_state
    return row


def test_the_control_reads_the_first_asking_arms_transcript_when_several_ask(
    tmp_path: Path, data_root: Path
) -> None:
    cfg = _compose("run_interviews", "arms=[amq,amq_information,single_shot_amq_transcript]",
                   f"data_root={data_root}")  # fmt: skip
    worker = _worker(cfg)
    seen: dict[str, Any] = {}
    real = worker._one

    async def one(interview: Any, own_transcript: str | None = None, arm: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = await real(interview, own_transcript, arm)
        seen[arm[0].questioning.policy if arm[0].mode == "amq" else "control"] = (own_transcript, out)
        return out

    worker._one = one
    interview = parse_transcript(TEXT, "T1")
    asyncio.run(worker._arms(interview, ["amq", "amq_information", "single_shot_amq_transcript"], None))
    from medagent.history.agent.state import InterviewState

    def transcript(out: dict[str, Any]) -> str:
        return InterviewState.from_dict(out["result"]["final_state"]).transcript()

    paper = next(k for k in seen if k not in ("information", "control"))
    assert transcript(seen[paper][1]) != transcript(seen["information"][1])  # the test can tell them apart
    assert seen["control"][0] == transcript(seen[paper][1])


def test_a_repeated_arm_measures_the_run_to_run_spread_outside_the_comparisons(
    tmp_path: Path, data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="repeat_arm=amq is not one of the arms"):
        ra.arm_configs(_compose("run_interviews", "arms=[single_shot,single_shot_oracle]", "repeat_arm=amq"))
    with pytest.raises(ValueError, match="single_shot_repeat is the repeat's name"):
        ra.arm_configs(_compose("run_interviews", "arms=[single_shot,single_shot_oracle]", "repeat_arm=single_shot",
                                "reference_arm=single_shot_repeat"))  # fmt: skip
    cfg = _compose("run_interviews", "arms=[single_shot,single_shot_oracle]", "repeat_arm=single_shot",
                   f"data_root={data_root}", f"run_dir={tmp_path / 'run'}",
                   "paired_endpoints=[bertscore_f1,n_turns]")  # fmt: skip
    calls = _fake_ray(cfg, monkeypatch)
    result = ra.run_arms(cfg)
    assert calls == [["single_shot"], ["single_shot_oracle"], ["single_shot_repeat"]] * 2
    assert {p["arm_b"] for p in result["paired"]} == {"single_shot_oracle"}  # the repeat is no comparison
    assert [(r["arm_b"], r["metric"], r["n"]) for r in result["repeat"]] == [
        ("single_shot_repeat", "bertscore_f1", 2), ("single_shot_repeat", "n_turns", 2)]  # fmt: skip
    text = (tmp_path / "run/report.md").read_text()
    assert "## Run-to-run spread (one arm run twice)" in text
    assert "| single_shot | n_turns | 2 | 1.000 | 1.000 | 0.000 | [0.000, 0.000] | 0.000 | 2 of 2 |" in text


def test_a_control_whose_asking_arm_failed_is_an_endpoint_failure_not_a_crash(data_root: Path) -> None:
    from medagent.history.evaluation.scoring import endpoint_failed
    from medagent.llm.base import LLMError

    cfg = _compose("run_interviews", "arms=[amq,single_shot_amq_transcript]", f"data_root={data_root}")
    worker = _worker(cfg)
    amq_cfg, _ = worker.arms["amq"]
    worker.arms["amq"] = (amq_cfg, type("Down", (), {"run": _raise(LLMError("503")), "cfg": amq_cfg})())
    out = dict(
        asyncio.run(worker._arms(parse_transcript(TEXT, "T1"), ["amq", "single_shot_amq_transcript"], None))
    )
    assert endpoint_failed(out["amq"]) and endpoint_failed(out["single_shot_amq_transcript"])
    assert "no transcript to summarise" in out["single_shot_amq_transcript"]["error"]


def _raise(exc: Exception) -> Any:
    async def run(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return staticmethod(run)
