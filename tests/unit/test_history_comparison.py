"""The history-taking comparison machinery: the single-shot contexts, the controls, the paired report."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import wilcoxon

from medagent.config import HistoryAgentConfig, InterviewEvalConfig
from medagent.eval.stats import bootstrap_ci
from medagent.history import build_history_agent
from medagent.history.evaluation.metrics import InterviewRecord, add_physician_hits, physician_diagnoses
from medagent.history.evaluation.paired import paired_difference, paired_table, wilcoxon_p
from medagent.history.evaluation.runner import arm_name, baseline_transcript, evaluate_interview
from medagent.interview.transcripts import parse_transcript
from medagent.run import RunDir
from tests.configs import history_agent_config
from tests.fakes import ScriptedChatModel
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever
from tests.unit.test_run_interviews import TEXT, _compose, _evaluator


def _run(
    cfg: HistoryAgentConfig, iv_id: str = "T1", own: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """One evaluated interview; returns the row and the user messages the agent's model received."""
    clinician = FakeClinician()
    model = clinician.model
    if cfg.mode == "single_shot":  # the baseline's summary and assessment requests are answered here

        def reply(body: dict[str, Any]) -> dict[str, Any]:
            from tests.fakes import completion

            name = body.get("prompt")
            if name == "clinical_summary":
                return completion(json.dumps({"summary": "Cough for three days."}))
            return clinician(body)

        model = ScriptedChatModel(reply)
    agent = build_history_agent(cfg, model, FakeRetriever(), BagOfWordsEmbedder())
    row = asyncio.run(
        evaluate_interview(
            parse_transcript(TEXT, iv_id),
            agent,
            ScriptedChatModel(_evaluator),
            InterviewEvalConfig(simulator_exchanges=2),
            embedder=BagOfWordsEmbedder(),
            own_transcript=own,
        )
    )
    users = [m["content"] for b in model.requests for m in b["messages"] if m["role"] == "user"]
    return json.loads(json.dumps(row.to_dict())), users


def test_opening_is_the_default_and_asks_the_patient_once() -> None:
    cfg = history_agent_config(mode="single_shot")
    assert cfg.single_shot.context == "opening" and arm_name(cfg) == "single_shot:opening"
    row, users = _run(cfg)
    # The simulated patient was asked the opening question once: the presenting complaint, nothing else.
    assert [s["question"] for s in row["simulator"]] == [cfg.opening_question]
    summary_request = next(u for u in users if "Doctor:" in u)
    assert "Hello, what brings you in today?" in summary_request
    assert "Do you smoke?" not in summary_request and summary_request.count("Doctor:") == 1
    assert row["arm"] == "single_shot:opening" and row["record"]["n_turns"] == 1


def test_full_context_is_the_oracle_over_the_visible_interview() -> None:
    cfg = history_agent_config(mode="single_shot", context="full")
    row, users = _run(cfg)
    assert row["simulator"] == [] and arm_name(cfg) == "single_shot:full"
    summary_request = next(u for u in users if "Do you smoke?" in u)
    assert "chest x-ray" not in summary_request  # the closing statement is still cut out


def test_transcript_run_context_reads_the_given_amq_transcript() -> None:
    cfg = history_agent_config(mode="single_shot", context="transcript_run")
    own = "Doctor: What brings you in?\nPatient: Cough.\nDoctor: Could you tell me about onset?\nPatient: Monday."
    _, users = _run(cfg, own=own)
    assert any("Could you tell me about onset?" in u and "Do you smoke?" not in u for u in users)
    with pytest.raises(ValueError, match="amq run's transcript"):
        baseline_transcript(cfg, "seen", None)
    with pytest.raises(ValueError, match="agent.single_shot.context"):
        baseline_transcript(history_agent_config(mode="single_shot", context="most"), "seen", None)


def test_amq_no_retrieval_control_config_and_arm() -> None:
    cfg = _compose("run_interviews", "history_agent=amq_no_retrieval")
    assert cfg.agent.mode == "amq" and not cfg.agent.retrieval.enabled and cfg.agent.max_turns == 16
    assert arm_name(cfg.agent) == "amq:no_retrieval"
    oracle = _compose("run_interviews", "history_agent=single_shot_oracle")
    assert (
        oracle.agent.single_shot.context == "full"
        and _compose("run_interviews", "history_agent=single_shot").agent.single_shot.context == "opening"
    )
    gpu = _compose("run_interviews", "interview_scoring=gpu")
    assert (
        gpu.eval.bertscore_model.hub_id == "microsoft/deberta-xlarge-mnli"
        and gpu.eval.bertscore_num_layers == 40
    )


def _amq_run_dir(tmp_path: Path) -> Path:
    rd = RunDir.create(str(tmp_path / "amq"), str(tmp_path), "x")
    rows = [_run(history_agent_config(mode="amq", max_turns=3), i)[0] for i in ("T1", "T2")]
    rows.append({"interview_id": "T3", "mode": "amq", "error": "LLMError: down", "reference": {}})
    rows.append({"interview_id": "T4", "mode": "amq", "skipped": "no usable closing statement"})
    rd.append_records(rd.interviews, rows, key="interview_id", failed=lambda r: bool(r.get("error")))
    return rd.root


def test_own_transcripts_come_from_the_finished_amq_interviews(tmp_path: Path) -> None:
    from pipelines.run_interviews import own_transcripts

    root = _amq_run_dir(tmp_path)
    cfg = _compose(
        "run_interviews",
        "history_agent=single_shot_amq_transcript",
        f"agent.single_shot.transcript_run={root}",
    )
    own = own_transcripts(cfg)
    assert sorted(own) == ["T1", "T2"]  # the failed and the skipped interview have none
    assert own["T1"].startswith("Doctor: Hello, what brings you in today?\nPatient: ")
    assert own["T1"].count("Doctor:") == 3  # max_turns=3
    assert own_transcripts(_compose("run_interviews", "history_agent=single_shot")) == {}


def _rec(i: str, **kw: Any) -> InterviewRecord:
    base = dict(
        interview_id=i, source="x", mode="amq", prediction="p", reference="r", reference_usable=True,
        valid=True, n_turns=1, asked=1, blocked=0, blocked_rate=0.0, redundant_rate=0.0, finish_reason="",
    )  # fmt: skip
    return InterviewRecord(**(base | kw))


def test_paired_difference_over_common_scored_interviews() -> None:
    a = [_rec(f"I{k}", bertscore_f1=v) for k, v in enumerate([0.40, 0.50, 0.45, 0.60, 0.55])]
    b = [_rec(f"I{k}", bertscore_f1=v) for k, v in enumerate([0.52, 0.58, 0.50, 0.61, 0.70])]
    b.append(_rec("I9", bertscore_f1=0.9))  # only in B: not a pair
    b[2] = _rec("I2", bertscore_f1=None, error="LLMError")  # failed in B: not a pair
    d = paired_difference(a, b, "bertscore_f1", arm_a="single_shot:opening", arm_b="amq")
    diffs = [0.12, 0.08, 0.01, 0.15]
    assert d.n == 4 and [p[0] for p in d.pairs] == ["I0", "I1", "I3", "I4"]
    assert d.mean_diff == pytest.approx(np.mean(diffs))
    assert d.ci_low is not None and d.ci_high is not None and d.ci_low <= d.mean_diff <= d.ci_high
    # The differences as computed (0.52 - 0.40 is not 0.12 to the last bit): BCa's bias correction counts
    # resampled means below the observed one, so on four values a one-ulp shift can move a bound.
    exact = [vb - va for _, va, vb in d.pairs]
    assert (d.ci_low, d.ci_high) == pytest.approx(bootstrap_ci(exact, seed=0))
    assert d.wilcoxon_p == pytest.approx(wilcoxon(diffs).pvalue)
    # Booleans count as 1/0; every zero difference leaves Wilcoxon nothing to rank.
    hits = paired_difference(
        [_rec("I0", differential_hit=True)], [_rec("I0", differential_hit=True)], "differential_hit"
    )
    assert hits.n == 1 and hits.mean_diff == 0 and hits.wilcoxon_p is None
    assert wilcoxon_p([0.0, 0.0, 0.3]) is None


def test_paired_table_leaves_not_applicable_metrics_without_pairs() -> None:
    a = [_rec("I0", mode="single_shot", red_flag_recall=None, rouge_l=0.1, n_turns=1)]
    b = [_rec("I0", red_flag_recall=1.0, rouge_l=0.3, n_turns=12)]
    rows = {r.metric: r for r in paired_table(a, b, arm_a="single_shot:opening", arm_b="amq")}
    assert rows["red-flag recall"].n == 0 and rows["red-flag recall"].mean_diff is None
    assert rows["turns"].mean_diff == 11 and rows["ROUGE-L F1"].mean_diff == pytest.approx(0.2)


def test_differential_hit_on_the_physicians_lexicon_diagnoses(data_root: Path) -> None:
    from medagent.history.evaluation.metrics import disease_canonical

    text = TEXT.replace("a chest infection", "covid or maybe pneumonia")
    gold = physician_diagnoses(
        [parse_transcript(text, "T1"), parse_transcript("D: Hi.\nP: Hi.\n", "T2")], str(data_root)
    )
    assert set(gold) == {"T1"} and "covid-19 virus disease" in gold["T1"]
    recs = [_rec("T1", differential=["COVID-19"]), _rec("T2", differential=["asthma"]), _rec("T3")]
    assert add_physician_hits(recs, gold, disease_canonical(str(data_root))) == 1
    assert recs[0].differential_hit is True and recs[0].gold_diagnoses == gold["T1"]
    assert recs[1].differential_hit is None  # no physician diagnosis found: left out, not a miss


def test_report_writes_paired_differences_against_compared_runs(
    tmp_path: Path, data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipelines.run_interviews as ri

    class Scorer:
        def score(self, predictions: list[str], references: list[str]) -> list[float]:
            return [0.5 + 0.01 * len(p) / max(len(p), 1) for p in predictions]

    from medagent.history.evaluation.metrics import BertScorer

    monkeypatch.setattr(BertScorer, "from_config", classmethod(lambda cls, cfg: Scorer()))
    amq_root = _amq_run_dir(tmp_path)
    base = RunDir.create(str(tmp_path / "base"), str(tmp_path), "x")
    # T5 is not one of this run's interviews: the compared arm is read over this run's interviews only.
    rows = [_run(history_agent_config(mode="single_shot"), i)[0] for i in ("T1", "T2", "T5")]
    base.append_records(base.interviews, rows, key="interview_id", failed=lambda r: bool(r.get("error")))
    cfg = _compose("run_interviews", f"compare=[{base.root}]", f"data_root={data_root}")
    interviews = [parse_transcript(TEXT, i) for i in ("T1", "T2", "T3", "T4")]
    result = ri.report(cfg, RunDir(amq_root), interviews)
    assert result["arm"] == "amq" and result["compare"]["single_shot:opening"]["n"] == 2
    paired = {p["metric"]: p for p in result["paired"]}
    assert paired["turns"]["n"] == 2 and paired["turns"]["mean_diff"] == 2  # 3 questions vs 1
    assert paired["turns"]["arm_a"] == "single_shot:opening" and paired["turns"]["arm_b"] == "amq"
    with open(amq_root / "paired.csv", encoding="utf-8") as f:
        pairs = list(csv.DictReader(f))
    assert {(p["metric"], p["interview_id"]) for p in pairs} >= {("turns", "T1"), ("turns", "T2")}
    text = (amq_root / "report.md").read_text()
    assert "## Paired differences" in text and "| single_shot:opening | amq | turns | 2 |" in text
    assert "repeats (lexical)" in text and result["repeat_rate_lexical"] is not None
    assert "BERTScore F1 backbone: sentence-transformers/all-mpnet-base-v2, layer 8" in text


def test_worker_hands_the_transcript_column_to_the_single_shot_control() -> None:
    from actors.interview_worker import InterviewWorker

    worker = InterviewWorker.__new__(InterviewWorker)  # no Ray: the clients are set by hand
    worker.agent_cfg = history_agent_config(mode="single_shot", context="transcript_run")
    worker.eval_cfg = InterviewEvalConfig(simulator_exchanges=2)
    clinician = FakeClinician()
    worker.llm, worker.embedder = ScriptedChatModel(_evaluator), BagOfWordsEmbedder()
    worker.agent = build_history_agent(worker.agent_cfg, clinician.model, None, worker.embedder)
    worker._sem = asyncio.Semaphore(1)
    worker.gold, worker.canonical = {}, None
    own = "Doctor: Hello, what brings you in today?\nPatient: Cough.\nDoctor: Could you tell me about onset?\nPatient: Since Monday."
    batch = {"id": ["T1"], "interview": [parse_transcript(TEXT, "T1").to_json()], "transcript": [own]}
    row = json.loads(asyncio.run(worker(batch))["row"][0])
    assert row["arm"] == "single_shot:transcript_run" and row["simulator"] == []  # no patient asked
    sent = [m["content"] for b in clinician.model.requests for m in b["messages"] if m["role"] == "user"]
    assert any("Since Monday." in u and "Do you smoke?" not in u for u in sent)
