"""The patient page's files (package data served by actors.ingress): the limit is filled in, text stays text."""

from importlib import resources

from actors.ingress import PAGE_FILES, page_file
from medagent.api import MAX_ANSWER_CHARS


def test_page_files_are_packaged_and_carry_the_api_limit() -> None:
    for name in PAGE_FILES:
        assert resources.files("actors").joinpath("static", name).is_file()
    html = page_file("interview.html")
    assert f'data-max-chars="{MAX_ANSWER_CHARS}"' in html and "__MAX_ANSWER_CHARS__" not in html
    assert '<script src="/interview/interview.js">' in html


def test_the_page_script_never_inserts_server_text_as_html() -> None:
    # Questions, assessments and guideline passages are model output and retrieved text: as HTML they would be
    # a script-injection path. The page builds every node with textContent.
    js = page_file("interview.js")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in js
    assert "textContent" in js
    # Each refusal the session routes document has its own sentence.
    for status in (404, 409, 422, 429, 502, 503):
        assert f"case {status}:" in js
