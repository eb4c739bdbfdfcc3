"""The viewer's server over run dirs written by the real writers: runs with CI and departures, question pages
with flips and cost order, one question's documents with located quotes, one interview, and the walls: CSP on
every response, GET only, no file outside a run (``..``, absolute, symlink out, encoded traversal)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from medagent.view import build_app, load_view
from medagent.view.app import CSP
from medagent.view.paths import OutsideRunError, confined
from medagent.view.questions import find_spans
from tests.unit import _view_fakes as fakes


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("view")
    fakes.write_runs(root)
    return root


@pytest.fixture(scope="module")
def client(runs_root: Path) -> TestClient:
    runs, notes = load_view([str(runs_root)])
    return TestClient(build_app(runs, notes, hosts=["testserver"]))


def _runs(client: TestClient) -> dict[str, dict[str, Any]]:
    return {r["label"]: r for r in client.get("/api/runs").json()["runs"]}


def test_runs_have_metrics_with_ci_config_cost_and_departures(client: TestClient) -> None:
    runs = _runs(client)
    assert set(runs) == {"b1 / full", "b1 / standalone", "interviews / amq"}
    full = runs["b1 / full"]
    assert full["metrics"]["correct"] == 1 and full["metrics"]["scored"] == 5  # q2 only
    assert full["metrics"]["invalid_rate"] == pytest.approx(0.2) and full["metrics"][
        "error_rate"
    ] == pytest.approx(0.2)
    lo, hi = full["metrics"]["ci95"]
    assert 0.0 <= lo <= 0.2 <= hi <= 1.0
    assert (
        full["config"]["benchmark"] == "b1"
        and full["config"]["mode"] == "full"
        and full["config"]["llm"] == "fake"
    )
    assert full["cost"]["prompt_tokens"] == pytest.approx(300.0)
    assert full["departures"] == fakes.DEPARTURES
    assert runs["interviews / amq"]["kind"] == "interview" and runs["interviews / amq"]["n"] == 1
    # The interview's scores come from its record, the share of questions the patient answered among them.
    scores = runs["interviews / amq"]["scores"]
    assert scores["patient_answered"]["mean"] == 1.0 and scores["patient_answered"]["n"] == 1


def test_question_pages_filter_flips_and_sort_by_cost(client: TestClient) -> None:
    runs = _runs(client)
    a, b = runs["b1 / standalone"]["index"], runs["b1 / full"]["index"]
    everything = client.get("/api/questions").json()
    assert everything["total"] == 5
    q4 = next(r for r in everything["rows"] if r["id"] == "q4")
    assert q4["cells"][str(b)]["status"] == "error" and q4["cells"][str(a)]["status"] == "right"
    assert next(r for r in everything["rows"] if r["id"] == "q3")["cells"][str(b)]["status"] == "invalid"
    r2w = client.get(f"/api/questions?flip=right_to_wrong&a={a}&b={b}").json()
    assert [r["id"] for r in r2w["rows"]] == ["q1", "q3", "q4"]  # INVALID and errors count as wrong
    w2r = client.get(f"/api/questions?flip=wrong_to_right&a={a}&b={b}").json()
    assert [r["id"] for r in w2r["rows"]] == ["q2"]
    by_cost = client.get("/api/questions?sort=-cost&limit=2&offset=1").json()
    assert [r["id"] for r in by_cost["rows"]] == ["q4", "q3"] and by_cost["total"] == 5
    assert client.get("/api/questions?flip=sideways&a=0&b=1").status_code == 400
    assert client.get("/api/questions?limit=zero").status_code == 400


def test_one_question_shows_trace_documents_and_located_quotes(client: TestClient) -> None:
    d = client.get("/api/question?id=q1").json()
    assert d["question"]["text"].endswith(fakes.HOSTILE) and d["gold"]["answer"] == "A"
    full = next(x for x in d["answers"] if x["label"] == "b1 / full")
    assert [s["kind"] for s in full["trace"]] == ["model", "tool", "gate", "memory", "tool"]
    docs = {doc["handle"]: doc for doc in full["documents"]}
    assert docs["D1"]["rerank_score"] == 2.5 and docs["D1"]["source"] == "pubmed"
    (quote,) = docs["D1"]["quotes"]
    (start, end), = quote["spans"]  # fmt: skip
    assert docs["D1"]["text"][start:end] == "Aspirin irreversibly inhibits   cyclooxygenase"
    assert docs["D2"]["quotes"] == [] and docs["D2"]["score"] == 0.42
    assert client.get("/api/question?id=nope").status_code == 404


def test_quote_spans_follow_elisions_and_refuse_what_is_not_there() -> None:
    text = "The drug X blocks Y. Later, in rats, it raised Z levels."
    spans = find_spans(text, "drug x blocks ... raised z")
    assert [text[s:e] for s, e in spans] == ["drug X blocks", "raised Z"]
    assert find_spans(text, "raised Z ... drug X") == []


def test_interview_turns_with_state_assessment_and_reference(client: TestClient) -> None:
    iv = _runs(client)["interviews / amq"]["index"]
    (listed,) = client.get(f"/api/interviews?run={iv}").json()["interviews"]
    d = client.get(f"/api/interview?run={iv}&id={listed['id']}").json()
    assert d["turns"] and all(t["question"] and t["state"] for t in d["turns"])
    assert d["turns"][0]["state"]["phase"] and isinstance(d["turns"][0]["state"]["slots"], list)
    assert d["assessment"]["statement"] and d["reference"]["statement"]
    assert d["record"]["interview_id"] == "iv-1"
    assert client.get(f"/api/interview?run={iv}&id=nope").status_code == 404


def test_an_interview_shows_each_slots_quote_and_what_grounding_refused(client: TestClient) -> None:
    from tests.unit._view_fakes import REFUSAL

    iv = _runs(client)["interviews / amq"]["index"]
    d = client.get(f"/api/interview?run={iv}&id=iv-1").json()
    assert d["refused"] == [REFUSAL]
    slots = d["final_state"]["slots"]
    assert slots and all(s["quote"] for s in slots)
    assert {"slot": "symptom", "value": "A little blood this morning.", "quote": "A little blood this morning.",
            "turn": 0} in slots  # fmt: skip


def test_every_response_carries_a_strict_csp(client: TestClient) -> None:
    for path in ("/", "/static/app.js", "/api/runs", "/api/question?id=nope", "/static/nope.js"):
        r = client.get(path)
        assert r.headers["content-security-policy"] == CSP, path
        assert r.headers["x-content-type-options"] == "nosniff"
    assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP
    assert client.post("/api/runs").status_code == 405
    assert "innerHTML" not in client.get("/static/app.js").text


def test_other_hosts_are_refused(runs_root: Path) -> None:
    runs, _ = load_view([str(runs_root)])
    c = TestClient(build_app(runs, hosts=["127.0.0.1"]), base_url="http://evil.example")
    assert c.get("/api/runs").status_code == 400


@pytest.mark.parametrize(
    "path",
    [
        "../b1-full/run/manifest.json",
        "traces/../../../etc/passwd",
        "/etc/passwd",
        "%2e%2e/%2e%2e/etc/passwd",
        "..%2f..%2fetc%2fpasswd",
        "traces\\..\\..\\manifest.json",
        "",
    ],
)
def test_files_outside_a_run_are_refused(client: TestClient, path: str) -> None:
    from urllib.parse import quote

    r = client.get(f"/api/file?run=0&path={quote(path, safe='%')}")
    assert r.status_code == 404 and "refused" in r.json()["error"]


def test_a_file_inside_the_run_is_served_and_a_symlink_out_is_not(runs_root: Path, tmp_path: Path) -> None:
    runs, _ = load_view([str(runs_root)])
    run = next(vr for vr in runs if vr.kind == "qa")
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    link = run.path / "figures" / "escape.txt"
    link.parent.mkdir(exist_ok=True)
    if not link.exists():
        os.symlink(secret, link)
    c = TestClient(build_app(runs, hosts=["testserver"]))
    assert c.get(f"/api/file?run={run.index}&path=manifest.json").json()["departures"] == fakes.DEPARTURES
    assert c.get(f"/api/file?run={run.index}&path=figures/escape.txt").status_code == 404
    with pytest.raises(OutsideRunError):
        confined(run.path, "figures/escape.txt")
    with pytest.raises(OutsideRunError):
        confined(run.path, str(run.path / "manifest.json"))  # absolute, even inside
