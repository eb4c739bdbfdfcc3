"""actors.metrics without Ray: what each recorder records (through fake metric objects), that the module
is a no-op outside Ray, and that the Grafana dashboard only queries metrics defined there."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from actors.metrics import (
    SPECS,
    MeteredChatModel,
    Meters,
    MetricSpec,
    RunMeter,
    exported_names,
    meters,
    ray_metric,
)
from medagent.agent.memory import Evidence, MemoryBank
from medagent.types import INVALID, Gold, Prediction
from tests.fakes import ScriptedChatModel, completion

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "cluster" / "grafana" / "medagent-dashboard.json"


class FakeMetric:
    def __init__(self, spec: MetricSpec) -> None:
        self.spec = spec
        self.records: list[tuple[str, float, dict[str, str]]] = []

    def _add(self, op: str, value: float, tags: dict[str, str] | None) -> None:
        tags = dict(tags or {})
        # The contract Ray enforces: every declared tag key, string values, positive increments.
        assert set(tags) == set(self.spec.tag_keys), (self.spec.name, tags)
        assert all(isinstance(v, str) for v in tags.values())
        assert op != "inc" or value > 0
        self.records.append((op, value, tags))

    def inc(self, value: float = 1.0, tags: dict[str, str] | None = None) -> None:
        self._add("inc", value, tags)

    def observe(self, value: float, tags: dict[str, str] | None = None) -> None:
        self._add("observe", value, tags)


def _meters() -> tuple[Meters, dict[str, FakeMetric]]:
    made: dict[str, FakeMetric] = {}

    def factory(spec: MetricSpec) -> FakeMetric:
        made[spec.name] = FakeMetric(spec)
        return made[spec.name]

    return Meters(factory), made


def _pred(qid: str, answer: str = "A", error: str | None = None, trace: Any = ()) -> Prediction:
    return Prediction(id=qid, benchmark="medqa", answer=answer, error=error, trace=list(trace))


def test_specs_are_prefixed_and_well_formed() -> None:
    for name, spec in SPECS.items():
        assert name == spec.name and name.startswith("medagent_") and re.fullmatch(r"[a-z_]+", name)
        assert spec.kind in {"counter", "histogram"}
        # Ray appends _total itself; a counter named ..._total would be exported as ..._total_total.
        assert not (spec.kind == "counter" and name.endswith("_total"))
        assert (spec.kind == "histogram") == bool(spec.boundaries)
        assert list(spec.boundaries) == sorted(spec.boundaries) and all(b > 0 for b in spec.boundaries)
    assert "ray_medagent_questions_total" in exported_names()
    assert "ray_medagent_llm_latency_seconds_bucket" in exported_names()


def test_tool_calls_by_tool_with_invented_names_bounded() -> None:
    m, made = _meters()
    trace = [
        {"kind": "model"},
        {"kind": "tool", "tool": "enable_search", "ok": True},
        {"kind": "tool", "tool": "made_up_tool", "ok": False},
        {"kind": "tool", "tool": "final_answer", "ok": True},
    ]
    m.tool_calls(_pred("q1", trace=trace))
    tags = [r[2] for r in made["medagent_tool_calls"].records]
    assert tags == [
        {"tool": "enable_search", "ok": "true"},
        {"tool": "other", "ok": "false"},
        {"tool": "final_answer", "ok": "true"},
    ]


def test_llm_calls_record_latency_and_tokens_through_the_wrapper(monkeypatch: Any) -> None:
    m, made = _meters()
    monkeypatch.setattr("actors.metrics.meters", lambda: m)
    llm = MeteredChatModel(
        ScriptedChatModel([completion("hi", prompt_tokens=7, completion_tokens=3)]), "smol"
    )
    resp = asyncio.run(llm.chat([{"role": "user", "content": "x"}], max_tokens=4))
    assert resp.content == "hi" and llm.model == "fake"  # other attributes pass through
    ((op, latency, tags),) = made["medagent_llm_latency_seconds"].records
    assert op == "observe" and latency == resp.latency_s and tags == {"model": "smol"}
    assert [(v, t["kind"]) for _, v, t in made["medagent_llm_tokens"].records] == [
        (7, "prompt"),
        (3, "completion"),
    ]


def test_run_meter_grades_each_question_once(monkeypatch: Any) -> None:
    m, made = _meters()
    monkeypatch.setattr("actors.metrics.meters", lambda: m)
    golds = {i: Gold(id=i, answer="A") for i in ("q0", "q1", "q2", "q3", "q4")}
    meter = RunMeter("medqa", "full", golds, done=["q0"])  # resumed: q0 was answered before
    assert meter.add([_pred("q0", "A"), _pred("q1", "A"), _pred("q2", INVALID)]) == ["correct", "invalid"]
    # q2 again (a retried batch) is not counted twice.
    assert meter.add([_pred("q2", "A"), _pred("q3", "B"), _pred("q4", "A", error="LLMError: down")]) == [
        "wrong",
        "error",
    ]
    assert meter.add([_pred("q9", "A")]) == ["ungraded"]  # no gold: never guessed
    records = made["medagent_questions"].records
    assert [r[2]["status"] for r in records] == ["correct", "invalid", "wrong", "error", "ungraded"]
    assert all(r[2]["benchmark"] == "medqa" and r[2]["agent"] == "full" for r in records)


def test_memory_bank_size_and_interviews() -> None:
    m, made = _meters()
    bank = MemoryBank("q1")
    bank.evidence.append(Evidence("D1", "d1", "s", "t", "quote", True))
    bank.unverified.append(Evidence("D2", "d2", "s", "t", "quote", False))
    m.memory_bank(bank, "full")
    assert made["medagent_memory_bank_size"].records == [("observe", 2, {"agent": "full"})]
    for row in ({"mode": "amq"}, {"mode": "amq", "error": "LLMError: x"}, {"mode": "amq", "skipped": "no"}):
        m.interview(row)
    assert [r[2]["status"] for r in made["medagent_interviews"].records] == ["ok", "error", "skipped"]


def test_without_ray_recording_is_a_no_op_and_ray_is_not_imported() -> None:
    # A fresh interpreter: importing and recording must neither import nor start Ray.
    code = (
        "import sys\n"
        "from actors.metrics import meters\n"
        "from medagent.types import Prediction\n"
        "m = meters(); m.questions(['correct'], 'b', 'full'); m.retrieval(0.01)\n"
        "m.tool_calls(Prediction(id='q', benchmark='b', answer='A', trace=[{'kind': 'tool', 'tool': 'x'}]))\n"
        "assert 'ray' not in sys.modules, 'ray imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
    assert meters() is meters()


def test_ray_metric_objects_build_for_every_spec_without_a_cluster() -> None:
    # ray.util.metrics accepts the declared names, tags and boundaries (it records nowhere without Ray).
    for spec in SPECS.values():
        metric = ray_metric(spec)
        assert metric.info["name"] == spec.name


def _exprs(panels: list[dict[str, Any]]) -> list[str]:
    out = []
    for p in panels:
        out += [t["expr"] for t in p.get("targets", []) if "expr" in t]
        out += _exprs(p.get("panels", []))
    return out


def test_grafana_dashboard_queries_only_our_metrics() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert board["title"] and board["uid"] and board["schemaVersion"] >= 30
    names = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "SessionName"} <= names
    exprs = _exprs(board["panels"])
    assert len(exprs) >= 8
    used = {n for e in exprs for n in re.findall(r"\bray_[a-zA-Z0-9_]+", e)}
    assert used and used <= exported_names(), sorted(used - exported_names())
    # Every metric we define is on the dashboard.
    assert all(any(s.name in e for e in exprs) for s in SPECS.values())
    assert all('SessionName=~"$SessionName"' in e for e in exprs)
