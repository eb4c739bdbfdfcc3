"""The run viewer's page in a real browser (Debian chromium + chromium-driver through selenium, as the patient
page's test drives it).

Two benchmark runs and one interview run are written by the real writers (``tests/unit/_view_fakes``), the
viewer's app is served by uvicorn on a free loopback port, and headless Chromium filters the questions to
flips, opens a question, finds the kept quote inside a <mark>, and checks that document and question text
holding ``<script>`` and ``<img onerror>`` is shown as text and runs nothing. With ``MEDAGENT_VIEW_SHOTS``
set, PNG screenshots of each view are saved to that folder. Without chromium, chromedriver or selenium the
test is skipped with the reason (``make browser-deps``).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from medagent.view import build_app, load_view
from tests.integration.conftest import browser_missing
from tests.unit import _view_fakes as fakes

pytestmark = pytest.mark.integration

WAIT_S = 30.0
SHOTS_ENV = "MEDAGENT_VIEW_SHOTS"


@pytest.fixture(scope="module")
def page_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import uvicorn

    root = tmp_path_factory.mktemp("view-runs")
    fakes.write_runs(root)
    runs, notes = load_view([str(root)])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(build_app(runs, notes), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while not server.started:
        assert time.monotonic() < deadline, "the viewer did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(WAIT_S)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = browser_missing()
    if reason:
        pytest.skip(f"browser test skipped: {reason}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(shutil.which("chromium"))
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1100",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(shutil.which("chromedriver"))), options=opts)
    yield driver
    driver.quit()


def _wait(browser: Any, what: str, predicate: Any) -> Any:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # The page replaces its view on every change, so an element found a moment ago may be gone: look again.
    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(browser, WAIT_S, poll_frequency=0.05, ignored_exceptions=ignored).until(
        lambda d: predicate(d), message=f"waiting for {what}"
    )


def _shot(browser: Any, name: str) -> None:
    folder = os.environ.get(SHOTS_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        # The whole page, not one window's worth (capped: a long transcript stays a readable image).
        height = int(browser.execute_script("return document.documentElement.scrollHeight"))
        browser.set_window_size(1400, min(max(height, 900), 4000))
        browser.save_screenshot(str(Path(folder) / f"{name}.png"))
        browser.set_window_size(1400, 1100)


def _idle(browser: Any) -> bool:
    return bool(browser.find_element("tag name", "body").get_attribute("data-busy") == "false")


def _select(browser: Any, element_id: str, label: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, element_id)).select_by_visible_text(label)


def _no_markup_ran(browser: Any) -> None:
    from selenium.webdriver.common.by import By

    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.find_elements(By.TAG_NAME, "img") == []
    assert browser.find_elements(By.CSS_SELECTOR, "main script, main b") == []


def test_flips_a_question_with_its_highlighted_quote_and_markup_as_text(page_url: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.get(page_url + "/")
    _wait(
        browser,
        "the page script",
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true",
    )
    cards = browser.find_elements(By.CSS_SELECTOR, "section.run")
    assert len(cards) == 3
    assert fakes.DEPARTURES[0] in browser.find_element(By.TAG_NAME, "main").text
    assert "95% CI" in browser.find_element(By.TAG_NAME, "main").text
    _shot(browser, "runs")

    browser.find_element(By.ID, "nav-questions").click()
    _wait(
        browser,
        "the questions table",
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#questions tbody tr")) == 5,
    )
    _select(browser, "run-a", "b1 / standalone")
    _wait(browser, "run A chosen", _idle)
    _select(browser, "run-b", "b1 / full")
    _wait(browser, "run B chosen", _idle)
    _select(browser, "flip", "right in A, wrong in B")
    _wait(browser, "the flips", lambda d: d.find_element(By.ID, "range").text == "1-3 of 3")
    ids = [r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "#questions tbody tr")]
    assert ids == ["q1", "q3", "q4"]
    assert "INVALID" in browser.find_element(By.ID, "questions").text
    _shot(browser, "questions_flips")

    browser.find_element(By.LINK_TEXT, "q1").click()
    _wait(browser, "the question", lambda d: d.find_elements(By.CSS_SELECTOR, "mark"))
    marks = [" ".join(m.text.split()) for m in browser.find_elements(By.CSS_SELECTOR, ".doc-text mark")]
    assert marks == ["Aspirin irreversibly inhibits cyclooxygenase"]  # the quote, found inside the document
    main = browser.find_element(By.TAG_NAME, "main").text
    assert fakes.HOSTILE.split("<img")[0] in main and '<img src=x onerror="window.__pwned = 2">' in main
    assert "<b>bold?</b>" in browser.find_element(By.ID, "options").text
    kinds = [k.text for k in browser.find_elements(By.CSS_SELECTOR, "table.trace .step-kind")]
    assert {"model", "tool", "gate", "memory"} <= set(kinds)
    _no_markup_ran(browser)
    _shot(browser, "question_trace_evidence")


def test_an_interview_turn_by_turn(page_url: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.get(page_url + "/#interviews")
    _wait(browser, "the interviews", lambda d: d.find_elements(By.CSS_SELECTOR, "a.ivlink"))
    browser.find_element(By.CSS_SELECTOR, "a.ivlink").click()
    _wait(browser, "the transcript", lambda d: d.find_elements(By.CSS_SELECTOR, "#turns .turn"))
    assert browser.find_elements(By.CSS_SELECTOR, "#turns .turn table.slots")
    assert "the quote does not express haemoptysis" in browser.find_element(By.ID, "refused").text
    assert browser.find_element(By.ID, "assessment").text and browser.find_element(By.ID, "reference").text
    _no_markup_ran(browser)
    _shot(browser, "interview")
