"""The human patient's page in a real browser (Debian chromium + chromium-driver through selenium).

Real Ray Serve (Ingress + InterviewSessions deployments, the real page and routes) with the history-taking
agent built on the scripted clinician model and retriever of the unit tests, so a whole interview takes
seconds. Without chromium, chromedriver or selenium the test is skipped with the reason (``make
browser-deps`` installs them when apt is permitted).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import httpx
import pytest

from medagent.api import MAX_ANSWER_CHARS
from medagent.config import ClusterConfig, InterviewSessionsConfig, LLMConfig
from medagent.history import HistoryTakingAgent
from tests.configs import history_agent_config
from tests.integration.conftest import browser_missing, clear_serve_apps
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever

pytestmark = pytest.mark.integration

WAIT_S = 30.0


@pytest.fixture(scope="module")
def page_url(ray_cluster: Any, cluster_cfg: ClusterConfig) -> Iterator[str]:
    from ray import serve

    from actors.ingress import Ingress
    from actors.interview_sessions import InterviewSessions

    cfg = InterviewSessionsConfig(enabled=True, agent=history_agent_config(max_turns=16), embedder=None)
    # The agent is built here on scripted fakes and handed to the deployment (pickled by reference to the
    # test modules, which the local workers import from the driver's sys.path).
    agent = HistoryTakingAgent(FakeClinician().model, cfg.agent, FakeRetriever(), BagOfWordsEmbedder())
    sessions = serve.deployment(InterviewSessions, name="InterviewSessions").bind(
        asdict(cfg), asdict(LLMConfig()), agent=agent
    )
    app = serve.deployment(Ingress, name="Ingress").bind(None, None, {}, sessions)
    clear_serve_apps()
    serve.run(app, name="medagent-page-test", route_prefix="/")
    yield f"http://{cluster_cfg.serve.http_host}:{cluster_cfg.serve.http_port}"
    serve.delete("medagent-page-test")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = browser_missing()
    if reason:
        pytest.skip(f"browser test skipped: {reason}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(shutil.which("chromium"))
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(shutil.which("chromedriver"))), options=opts)
    yield driver
    driver.quit()


def _wait(browser: Any, what: str, predicate: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, WAIT_S, poll_frequency=0.05).until(
        lambda d: predicate(d), message=f"waiting for {what}"
    )


def _text(browser: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(browser.find_element(By.ID, element_id).text)


def _idle(browser: Any) -> bool:
    return bool(browser.find_element("tag name", "body").get_attribute("data-busy") == "false")


def _answer(browser: Any, text: str, *, paste: bool = False) -> None:
    from selenium.webdriver.common.by import By

    box = browser.find_element(By.ID, "answer")
    box.clear()
    if paste:  # typing 10 kB key by key takes minutes; set the value as a paste would
        browser.execute_script("arguments[0].value = arguments[1];", box, text)
    else:
        box.send_keys(text)
    browser.find_element(By.ID, "send").click()


def test_a_person_interviews_through_the_page(page_url: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    t0 = time.perf_counter()
    browser.get(f"{page_url}/interview")
    _wait(
        browser, "the page script", lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
    )
    browser.find_element(By.ID, "start").click()
    _wait(browser, "the first question", lambda d: "brings you in" in _text(d, "question"))
    assert _text(browser, "phase") == "triage" and _text(browser, "turn") == "1"

    # Bad input gets a sentence, never a request that fails or a trace.
    _answer(browser, "   ")
    assert _text(browser, "message") == "Please type an answer before sending."
    _answer(browser, "x" * 10_000, paste=True)
    assert f"{MAX_ANSWER_CHARS:,}" in _text(browser, "message") and "10,000 characters" in _text(
        browser, "message"
    )
    assert _text(browser, "turn") == "1"  # nothing was sent

    _answer(browser, "I have a cough and a fever.")
    _wait(browser, "the second question", lambda d: _idle(d) and _text(d, "turn") == "2")
    assert "cough and a fever" in _text(browser, "slots") and "viral URTI" in _text(browser, "differential")
    assert "I have a cough and a fever." in _text(browser, "transcript") and _text(browser, "message") == ""
    assert _text(browser, "why") == "Why: paper order, pass 1"  # the policy's reason for this question

    # A red flag moves the agent to Confirmation; two confirmation questions later it assesses.
    _answer(browser, "This morning I coughed up blood.")
    _wait(browser, "the red flag", lambda d: _idle(d) and "haemoptysis" in _text(d, "red-flags"))
    assert _text(browser, "phase") == "confirmation"
    for n in range(2):
        _answer(browser, "No, nothing like that." if n else "No.")
        _wait(browser, f"confirmation answer {n}", _idle)
    _wait(browser, "the assessment", lambda d: d.find_element(By.ID, "assessment-section").is_displayed())
    assert "covid swab" in _text(browser, "statement")
    assert "COVID-19" in _text(browser, "assessment-differential") and "cites g1#p0" in _text(
        browser, "assessment-differential"
    )
    passage = browser.find_element(By.CSS_SELECTOR, "[data-passage-id='g1#p0']")
    assert "passage cited" in str(passage.get_attribute("class")) and "Test for COVID-19." in passage.text
    assert not browser.find_element(By.ID, "send").is_enabled()  # finished: nothing more to send
    page = browser.find_element(By.TAG_NAME, "body").text
    assert "Traceback" not in page and "Internal Server Error" not in page
    print(f"\npatient page: a 4-answer interview in the browser took {time.perf_counter() - t0:.1f} s")


def test_unknown_session_and_oversized_answer_get_clear_messages(page_url: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.get(f"{page_url}/interview#session=0123456789abcdef")
    _wait(browser, "the 404 message", lambda d: "does not exist" in _text(d, "message"))
    assert "Start a new interview" in _text(browser, "message")
    assert not browser.find_element(By.ID, "send").is_enabled()
    # The server refuses what the page would not send, as JSON (never a trace) with the limit in it.
    with httpx.Client(timeout=30) as client:
        start = client.post(f"{page_url}/v1/interview/sessions", json={}).json()
        sid, token = start["session_id"], {"x-session-token": start["token"]}
        r = client.post(
            f"{page_url}/v1/interview/sessions/{sid}/answer", json={"answer": "x" * 10_000}, headers=token
        )
        assert r.status_code == 422 and "Traceback" not in r.text
        assert any(str(MAX_ANSWER_CHARS) in d["msg"] for d in r.json()["detail"])
        script = client.get(f"{page_url}/interview/interview.js")
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        html = client.get(f"{page_url}/interview").text
        assert f'data-max-chars="{MAX_ANSWER_CHARS}"' in html
