"""Interview sessions at the edge, on a real session store and a scripted clinician (no Ray): a start is a
JSON request and returns a token every later call must carry; one client cannot take every slot;
refusals are one log line, never a traceback. Finding 5 (and the session half of 4) of the edge review."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from medagent.api import InterviewSessionResponse
from medagent.config import InterviewSessionsConfig
from tests.unit._edge_fakes import client_for, session_store

API = "/v1/interview/sessions"


def test_a_start_needs_a_json_body_so_another_site_cannot_send_it(monkeypatch: pytest.MonkeyPatch) -> None:
    store = session_store()
    client = client_for(monkeypatch, sessions=store)
    cross_site = {"origin": "https://evil.example", "content-type": "text/plain"}
    assert client.post(API, content=b"{}", headers=cross_site).status_code == 415
    assert client.post(API).status_code == 415  # no body, no content type
    assert client.post(API, content=b"", headers={"content-type": "application/json"}).status_code == 422
    assert asyncio.run(store.count()) == 0
    r = client.post(API, json={})
    assert r.status_code == 201 and r.json()["token"]
    InterviewSessionResponse.model_validate(r.json())
    assert "access-control-allow-origin" not in r.headers


def test_every_call_on_a_session_needs_its_token(monkeypatch: pytest.MonkeyPatch) -> None:
    client = client_for(monkeypatch, sessions=session_store())
    start = client.post(API, json={}).json()
    sid, token = start["session_id"], start["token"]
    url = f"{API}/{sid}"
    for headers in [{}, {"x-session-token": "not-the-token"}]:
        assert client.get(url, headers=headers).status_code == 404
        assert client.post(f"{url}/answer", json={"answer": "a cough"}, headers=headers).status_code == 404
        assert client.delete(url, headers=headers).status_code == 404
    good = {"x-session-token": token}
    r = client.post(f"{url}/answer", json={"answer": "I have had a cough for three days."}, headers=good)
    assert r.status_code == 200 and r.json()["token"] is None  # the start alone carries it
    assert client.get(url, headers=good).json()["turn"] >= 1
    assert client.delete(url, headers=good).status_code == 204
    assert client.get(url, headers=good).status_code == 404


def test_one_client_cannot_fill_every_slot(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    store = session_store(max_sessions=8, starts_per_client=2)
    client = client_for(monkeypatch, sessions=store)
    codes = [client.post(API, json={}).status_code for _ in range(5)]
    assert codes == [201, 201, 429, 429, 429]
    assert asyncio.run(store.count()) == 2  # six slots left for everyone else
    other = asyncio.run(store.start("10.0.0.7"))
    assert other["token"]
    refusals = [r for r in caplog.records if r.name == "medagent.edge"]
    assert len(refusals) == 3 and all(r.exc_info is None and "429" in r.getMessage() for r in refusals)


def test_refusals_are_values_from_the_deployment_and_one_line_at_the_edge(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store = session_store(max_turns=1)
    client = client_for(monkeypatch, sessions=store)
    start = client.post(API, json={}).json()
    url, good = f"{API}/{start['session_id']}", {"x-session-token": start["token"]}
    assert (
        client.post(f"{url}/answer", json={"answer": "a cough"}, headers=good).json()["status"] == "finished"
    )
    caplog.clear()
    assert client.post(f"{url}/answer", json={"answer": "more"}, headers=good).status_code == 409
    assert client.get(f"{API}/nope", headers=good).status_code == 404
    lines = [r for r in caplog.records if r.name == "medagent.edge"]
    assert len(lines) == 2 and all(r.exc_info is None for r in caplog.records)
    # The deployment answers a refusal as a value (Serve logs a traceback for each exception a replica raises).
    refused: dict[str, Any] = asyncio.run(store.call("get", session_id="nope", token="x"))
    assert refused["refused"] == 404 and "nope" in refused["detail"]


def test_idle_expiry_is_minutes_by_default() -> None:
    cfg = InterviewSessionsConfig()
    assert 60 <= cfg.ttl_s <= 30 * 60 and cfg.starts_per_client < cfg.max_sessions
