"""Time to first render of the run viewer on a MedQA-sized comparison: 1,273 questions x 6 runs.

Run: ``python benchmarks/bench_view.py [--questions 1273] [--runs 6] [--no-browser]``

Six run directories are written in a temp folder through the real writers (``RunDir``: manifest, golds,
questions, predictions, one trace file of a dozen steps per question). Printed, all in this process:
- startup: ``load_view`` (find, read, score with bootstrap CI, summarise) beside the report's own
  ``load_runs`` over the same folders (it reads every trace), the baseline, as a ratio;
- server: the first page of JSON the page asks for (``/api/runs`` then ``/api/questions``), a flips page,
  a cost-sorted page and one question in full, through the real app (Starlette's test client);
- browser (when chromium, chromedriver and selenium are present): headless Chromium from navigation to
  the first questions table painted (``performance.mark("questions-rendered")``, set by the page after it
  replaced the view, read after two animation frames), over a real uvicorn server on loopback.
"""

from __future__ import annotations

import argparse
import random
import shutil
import socket
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from medagent.config import AgentConfig, BenchmarkConfig, LLMConfig, RunConfig  # noqa: E402
from medagent.report.loader import load_runs  # noqa: E402
from medagent.run import RunDir  # noqa: E402
from medagent.types import Gold, Prediction, Question  # noqa: E402
from medagent.view import build_app, load_view  # noqa: E402

MODES = ("standalone", "full", "no_search", "no_cache_prune", "gated", "no_tools")
LETTERS = "ABCDE"


def _trace(i: int, answer: str) -> list[dict[str, Any]]:
    docs = [
        {"handle": f"D{k}", "doc_id": f"pubmed:{i}-{k}", "source": "pubmed", "score": 0.5, "text": "x " * 150}
        for k in range(1, 9)
    ]
    steps: list[dict[str, Any]] = []
    for tool in (
        "enable_search",
        "relevance_analysis",
        "locate_evidence",
        "relevance_analysis",
        "final_answer",
    ):
        steps.append(
            {"kind": "model", "prompt_tokens": 500, "completion_tokens": 40, "content": "{...}" * 20}
        )
        result: Any = {"documents": docs} if tool == "enable_search" else {"batch": ["D1", "D2"]}
        steps.append({"kind": "tool", "tool": tool, "arguments": {"answer": answer}, "result": result})
    return [{"step": n, **s} for n, s in enumerate(steps)]


def write_runs(root: Path, n_questions: int, n_runs: int) -> list[Path]:
    questions = [
        Question(id=f"medqa-{i}", text=f"A patient {i} presents with ... " * 8, options={k: f"option {k}" for k in LETTERS},
                 benchmark="medqa")
        for i in range(n_questions)
    ]  # fmt: skip
    golds = [Gold(id=q.id, answer=LETTERS[i % 5]) for i, q in enumerate(questions)]
    paths = []
    for r in range(n_runs):
        mode = MODES[r % len(MODES)]
        rd = RunDir(root / f"medqa-{mode}-{r}" / "run")
        cfg = RunConfig(benchmark=BenchmarkConfig(name="medqa", loader="medqa"), agent=AgentConfig(mode=mode),
                        llm=LLMConfig(name=f"llm-{r}"))  # fmt: skip
        rd.write_json(rd.manifest, {"config": asdict(cfg), "git_sha": None})
        rd.write_golds(golds)
        rd.write_questions(questions)
        preds = []
        for i, q in enumerate(questions):
            # Right about 60% of the time, independently per run, so every pair of runs has flips.
            rng = random.Random(r * 100_003 + i)
            answer = golds[i].answer if rng.random() < 0.6 else rng.choice(LETTERS)
            preds.append(Prediction(id=q.id, benchmark="medqa", answer=answer, trace=_trace(i, answer),
                                    usage={"prompt_tokens": 2000 + i % 300, "completion_tokens": 200, "llm_calls": 6},
                                    latency_s=3.0 + (i % 7)))  # fmt: skip
        rd.append_predictions(preds)
        paths.append(rd.root)
    return paths


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _browser(app: Any) -> float | None:
    if not all(shutil.which(x) for x in ("chromium", "chromedriver")):
        return None
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.support.ui import WebDriverWait
    except ImportError:
        return None
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(shutil.which("chromium"))
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(shutil.which("chromedriver"))), options=opts)
    try:
        driver.get(f"http://127.0.0.1:{port}/static/app.js")  # warm the browser process, not the page
        driver.get(f"http://127.0.0.1:{port}/#questions")
        WebDriverWait(driver, 60, poll_frequency=0.01).until(
            lambda d: d.execute_script("return performance.getEntriesByName('questions-rendered').length > 0")
        )
        # The mark is set when the table is in the DOM; a paint follows within two animation frames.
        return float(driver.execute_async_script(
            "const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() =>"
            " done(performance.getEntriesByName('questions-rendered')[0].startTime)));"
        )) / 1000  # fmt: skip
    finally:
        driver.quit()
        server.should_exit = True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--questions", type=int, default=1273)
    p.add_argument("--runs", type=int, default=6)
    p.add_argument("--no-browser", action="store_true")
    args = p.parse_args()
    from starlette.testclient import TestClient

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _, t_write = _timed(lambda: write_runs(root, args.questions, args.runs))
        print(f"wrote {args.runs} runs x {args.questions} questions in {t_write:.1f} s ({root})")
        (runs, notes), t_view = _timed(lambda: load_view([str(root)]))
        _, t_report = _timed(lambda: load_runs([str(root)]))
        print(f"startup: load_view {t_view:.2f} s; the report's load_runs (reads every trace) {t_report:.2f} s; "
              f"ratio {t_view / t_report:.2f}")  # fmt: skip
        app = build_app(runs, notes, hosts=["testserver", "127.0.0.1"])
        client = TestClient(app)
        first, t_first = _timed(lambda: (client.get("/api/runs"), client.get("/api/questions?limit=50")))
        assert first[1].status_code == 200 and first[1].json()["total"] == args.questions
        print(f"server: first page JSON (/api/runs + 50 rows x {args.runs} runs) {1000 * t_first:.0f} ms, "
              f"{len(first[0].content) + len(first[1].content)} bytes")  # fmt: skip
        flips, t_flips = _timed(lambda: client.get("/api/questions?flip=right_to_wrong&a=0&b=1&limit=50"))
        cost, t_cost = _timed(lambda: client.get("/api/questions?sort=-cost&limit=50&offset=600"))
        one, t_one = _timed(lambda: client.get("/api/question?id=medqa-7"))
        whole, t_whole = _timed(lambda: client.get("/api/questions?limit=200"))
        print(f"server: flips page {1000 * t_flips:.0f} ms ({flips.json()['total']} flips); cost-sorted page "
              f"{1000 * t_cost:.0f} ms; one question with {args.runs} traces {1000 * t_one:.0f} ms "
              f"({len(one.content)} bytes); a 200-row page {1000 * t_whole:.0f} ms")  # fmt: skip
        if args.no_browser:
            return
        painted = _browser(app)
        if painted is None:
            print("browser: skipped (chromium, chromedriver or selenium missing)")
        else:
            print(
                f"browser: headless Chromium, navigation to the first questions table painted {1000 * painted:.0f} ms"
            )


if __name__ == "__main__":
    main()
