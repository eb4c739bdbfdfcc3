"""Portable rows: a run's rows without the data's text, restored exactly from the same sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from medagent.run.portable import (
    CHECKSUM,
    DOCS,
    POINTER,
    PortableRowError,
    Redactor,
    RowSources,
    export_run,
    restore_run,
    row_checksum,
)
from pipelines.portable_rows import QA_FILES, main, qa_sources

TURNS = [
    "Hello, what brings you in today?",
    "I've had this sharp pain in my chest for just over a week now, worse when I breathe in.",
    "OK. Any cough or fever?",
    "No fever. Yes.",
    "So it sounds like it could be a pulmonary embolism, so we will do a work up for that.",
]


def _row(iid: str = "RES9001", arm: str = "amq") -> dict[str, Any]:
    return {
        "interview_id": iid,
        "source": "fareez",
        "arm": arm,
        "reference": {"statement": TURNS[4], "turns": [4]},
        "result": {
            "assessment": {
                "statement": "The most likely diagnosis is pleurisy; we should get a chest X-ray."
            },
            "final_state": {"asked": [{"text": "Any cough?", "answer": TURNS[3]}, {"answer": TURNS[1]}]},
        },
        "simulator": [{"answer": TURNS[1], "context": "Doctor: " + TURNS[0]}],
        "record": {"prediction": "Quoted: " + TURNS[1][:40] + " and more", "rouge_l": 0.125, "n_facts": 27},
    }


def _copied_runs(obj: Any, sources: list[str], n: int) -> list[str]:
    """Every string of ``obj`` holding a run of ``n`` characters copied from ``sources``."""
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _copied_runs(v, sources, n)]
    if isinstance(obj, list):
        return [s for v in obj for s in _copied_runs(v, sources, n)]
    if isinstance(obj, str):
        return [obj] if any(obj[i : i + n] in src for src in sources for i in range(len(obj) - n + 1)) else []
    return []


def test_copied_text_becomes_pointers_and_comes_back_exactly() -> None:
    red = Redactor(TURNS)
    row = _row()
    portable = red.redact(row)
    assert portable[CHECKSUM] == row_checksum(row)
    assert portable["reference"]["statement"] == {POINTER: [[4, 0, len(TURNS[4])]]}
    assert portable["simulator"][0]["context"] == {POINTER: ["Doctor: ", [0, 0, len(TURNS[0])]]}
    assert portable["record"]["prediction"][POINTER][0] == "Quoted: "
    # A short answer ("No fever. Yes.") and the agent's own words stay as they are.
    assert portable["result"]["final_state"]["asked"][0]["answer"] == TURNS[3]
    assert portable["result"]["assessment"]["statement"] == row["result"]["assessment"]["statement"]
    assert _copied_runs({k: v for k, v in portable.items() if k != CHECKSUM}, TURNS, 24) == []
    assert red.restore(json.loads(json.dumps(portable))) == row


def test_restore_from_other_sources_is_an_error() -> None:
    portable = Redactor(TURNS).redact(_row())
    changed = [*TURNS[:4], TURNS[4].replace("embolism", "embolus!")]
    with pytest.raises(PortableRowError, match="checksum differs"):
        Redactor(changed).restore(portable)
    with pytest.raises(PortableRowError, match="outside the sources"):
        Redactor(TURNS[:2]).restore(portable)
    with pytest.raises(PortableRowError, match="not a portable row"):
        Redactor(TURNS).restore(_row())


def test_a_row_that_already_has_a_pointer_key_is_refused() -> None:
    with pytest.raises(PortableRowError, match="already has"):
        Redactor(TURNS).redact({"x": {POINTER: ["a"]}})


def test_nul_surrogates_and_malformed_pointers() -> None:
    red = Redactor(TURNS)
    # A NUL in a row never lets a run match across two sources, and the row comes back.
    row = {"a": TURNS[0] + "\x00" + TURNS[1], "b": "lone \ud800 surrogate " + TURNS[2] + " and more words"}
    portable = red.redact(row)
    assert red.restore(json.loads(json.dumps(portable))) == row
    for bad in ([[0, 0]], [[0, 5, 2]], [["0", 0, 3]], "text", [[0, 0, 10**6]]):
        with pytest.raises(PortableRowError):
            red.restore({CHECKSUM: "x", "a": {POINTER: bad}})


def _write_run(root: Path, rows_by_arm: dict[str, list[dict[str, Any]]]) -> None:
    for arm, rows in rows_by_arm.items():
        d = root / "arms" / arm
        d.mkdir(parents=True, exist_ok=True)
        (d / "interviews.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        (d / "manifest.json").write_text(json.dumps({"arm": arm}))


def _sources(path: Path, rows: list[dict[str, Any]]) -> Any:
    assert rows, "sources are loaded only for rows to convert"
    return lambda r: RowSources(TURNS)


def test_export_then_restore_gives_the_run_back_and_never_duplicates(tmp_path: Path) -> None:
    run, out, back = tmp_path / "run", tmp_path / "portable", tmp_path / "back"
    rows = {"amq": [_row("RES9001"), _row("RES9002")], "single_shot": [_row("RES9001", "single_shot")]}
    _write_run(run, rows)
    with open(run / "arms/amq/interviews.jsonl", "a") as f:
        f.write('{"interview_id": "RES90')  # a partial last line left by a kill is not exported
    files = export_run(run, out, _sources, row_files=["interviews.jsonl"])
    assert {(f.path, f.rows) for f in files} == {
        ("arms/amq/interviews.jsonl", 2),
        ("arms/single_shot/interviews.jsonl", 1),
    }
    assert (out / "arms/amq/manifest.json").exists()
    for f in out.rglob("interviews.jsonl"):
        assert _copied_runs([json.loads(x) for x in f.read_text().splitlines()], TURNS, 24) == []

    # A run dir holding the first row only gets the second; a second restore adds nothing.
    _write_run(back, {"amq": rows["amq"][:1]})
    restored = restore_run(out, back, _sources, row_files=["interviews.jsonl"])
    assert {(f.path, f.written) for f in restored} == {
        ("arms/amq/interviews.jsonl", 1),
        ("arms/single_shot/interviews.jsonl", 1),
    }
    again = restore_run(out, back, _sources, row_files=["interviews.jsonl"])
    assert [f.written for f in again] == [0, 0]
    for arm, want in rows.items():
        got = [json.loads(x) for x in (back / "arms" / arm / "interviews.jsonl").read_text().splitlines()]
        assert got == want
    assert json.loads((back / "arms/single_shot/manifest.json").read_text()) == {"arm": "single_shot"}


def test_restore_appends_after_a_whole_unterminated_last_row(tmp_path: Path) -> None:
    """A run file whose last row lost only its newline keeps that row; the rest are appended to the same
    file (never swapped for a copy that a run writing it meanwhile would lose rows from)."""
    run, out, back = tmp_path / "run", tmp_path / "portable", tmp_path / "back"
    rows = [_row("RES9001"), _row("RES9002"), _row("RES9003")]
    _write_run(run, {"amq": rows})
    export_run(run, out, _sources, row_files=["interviews.jsonl"])
    _write_run(back, {"amq": rows[:2]})
    target = back / "arms/amq/interviews.jsonl"
    target.write_text(target.read_text().rstrip("\n"))
    inode = target.stat().st_ino
    (done,) = restore_run(out, back, _sources, row_files=["interviews.jsonl"])
    assert done.written == 1 and target.stat().st_ino == inode
    assert target.read_text() == (run / "arms/amq/interviews.jsonl").read_text()


def test_a_trace_name_outside_the_traces_dir_is_refused(tmp_path: Path) -> None:
    run, out = tmp_path / "run", tmp_path / "portable"
    _write_run(run, {"amq": [_row()]})
    export_run(run, out, _sources, row_files=["interviews.jsonl"])
    line = {"$file": "../../escape.json"} | Redactor(TURNS).redact({"id": "x"})
    (out / "arms/amq/traces.portable.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(PortableRowError, match="not a trace file name"):
        restore_run(out, tmp_path / "back", _sources, row_files=["interviews.jsonl"])
    assert not (tmp_path / "escape.json").exists()


def _index(root: Path, doc_id: str, doc: str) -> Path:
    import pyarrow as pa

    from medagent.retrieval.store import STORE_COLUMNS, write_store

    values = [doc_id, doc_id.split("#")[0], None, "a guideline", doc, "medquad"]
    table = pa.table({c: [v] for c, v in zip(STORE_COLUMNS, values, strict=True)})
    write_store(root / "index" / "medquad.store", [table])
    return root


def test_an_interview_row_quoting_the_guideline_index_commits_no_document_text(
    tmp_path: Path, data_root: Path
) -> None:
    """An AMQ arm's rows carry the guideline evidence it retrieved, with the documents' ids: the documents
    are sources too, named in the portable row, and both commands need the index."""
    doc = "If the chest pain does not go away within minutes, or comes with sweating, call 9-1-1 at once."
    index = _index(tmp_path / "guidelines", "medquad:1-1#0", doc)
    row = {"interview_id": "RES0001", "source": "fareez", "evidence": [{"id": "medquad:1-1#0", "text": doc}]}
    run = tmp_path / "run"
    _write_run(run, {"amq": [row]})
    config = {"interviews": {"source": "fareez"}, "index_dir": str(index)}
    (run / "arms/amq/manifest.json").write_text(json.dumps({"config": config}))
    argv = ["--data-root", str(data_root)]
    assert main(["export", str(run), str(tmp_path / "p"), *argv]) == 0
    (line,) = (tmp_path / "p/arms/amq/interviews.jsonl").read_text().splitlines()
    assert doc[:24] not in line and json.loads(line)[DOCS] == ["medquad:1-1#0"]
    assert main(["restore", str(tmp_path / "p"), str(tmp_path / "r"), *argv]) == 0
    assert (tmp_path / "r/arms/amq/interviews.jsonl").read_bytes() == (
        run / "arms/amq/interviews.jsonl"
    ).read_bytes()
    # Without the index neither command runs: nothing is committed with the documents' text.
    none = ["--index-dir", str(tmp_path / "none")]
    assert main(["export", str(run), str(tmp_path / "p2"), *argv, *none]) == 2
    assert not (tmp_path / "p2/arms/amq/interviews.jsonl").exists()
    assert main(["restore", str(tmp_path / "p"), str(tmp_path / "r2"), *argv, *none]) == 2


def test_restore_into_a_run_dir_with_other_rows_is_an_error(tmp_path: Path) -> None:
    run, out, other = tmp_path / "run", tmp_path / "portable", tmp_path / "other"
    _write_run(run, {"amq": [_row("RES9001")]})
    export_run(run, out, _sources, row_files=["interviews.jsonl"])
    _write_run(other, {"amq": [_row("RES9002")]})
    with pytest.raises(PortableRowError, match="differ at row 1"):
        restore_run(out, other, _sources, row_files=["interviews.jsonl"])


def test_cli_round_trip_on_a_real_transcript(tmp_path: Path, data_root: Path) -> None:
    from medagent.interview.sources import load_interviews

    iv = load_interviews("x", "fareez", data_root, ids=["RES0001"]).interviews[0]
    patient = next(t.text for t in iv.turns if t.speaker == "patient" and len(t.text) > 60)
    row = {"interview_id": "RES0001", "source": "fareez", "reference": {"statement": iv.turns[-1].text}}
    row["simulator"] = [{"answer": patient}]
    run = tmp_path / "run"
    _write_run(run, {"amq": [row]})
    # The case facts every arm of the interview is scored against travel with the rows.
    facts = tmp_path / "facts"
    facts.mkdir()
    name = "RES0001.kkkkkkkkkkkkkkkk.json"
    fact_set = {
        "interview_id": "RES0001",
        "key": "k" * 64,
        "facts": [{"statement": "pain", "quote": patient}],
    }
    (facts / name).write_text(json.dumps(fact_set, indent=1))
    config = {"interviews": {"source": "fareez"}, "eval": {"facts_dir": str(facts)}}
    (run / "arms/amq/manifest.json").write_text(json.dumps({"config": config}))
    assert main(["export", str(run), str(tmp_path / "p"), "--data-root", str(data_root)]) == 0
    text = (tmp_path / "p/arms/amq/interviews.jsonl").read_text()
    assert patient[:30] not in text
    assert main(["restore", str(tmp_path / "p"), str(tmp_path / "r"), "--data-root", str(data_root)]) == 0
    assert (tmp_path / "r/arms/amq/interviews.jsonl").read_text() == (
        run / "arms/amq/interviews.jsonl"
    ).read_text()
    assert patient[:30] not in (tmp_path / "p/facts" / name).read_text()
    restored = tmp_path / "facts2"
    argv = ["restore", str(tmp_path / "p"), str(tmp_path / "r2"), "--data-root", str(data_root)]
    assert main([*argv, "--facts-dir", str(restored)]) == 0
    assert (restored / name).read_bytes() == (facts / name).read_bytes()
    (restored / name).write_text(json.dumps(fact_set | {"facts": []}, indent=1))
    assert main([*argv, "--facts-dir", str(restored)]) == 2  # other facts than the rows were scored on
    assert main(["restore", str(tmp_path / "nothing"), str(tmp_path / "r")]) == 2


def test_qa_cell_round_trip_with_traces_and_index_documents(tmp_path: Path, data_root: Path) -> None:
    """A QA cell: questions, golds and predictions from a real benchmark, a quote of an index document in
    the evidence and the trace; every copied run leaves the portable copy, and the restore is exact."""
    import pyarrow as pa

    from medagent.data import load_benchmark
    from medagent.retrieval.store import STORE_COLUMNS, write_store
    from medagent.run import RunDir
    from medagent.types import Prediction

    index = tmp_path / "index"
    doc = "Pulmonary embolism presents with pleuritic chest pain, tachycardia and hypoxaemia in most cases."
    table = pa.table(
        {
            c: [v]
            for c, v in zip(STORE_COLUMNS, ["pm:1#0", "pm:1", None, "PE review", doc, "pubmed"], strict=True)
        }
    )
    write_store(index / "index" / "pubmed.store", [table])
    (q, g), (q2, g2) = load_benchmark("medqa", data_root, limit=2).pairs
    cell = tmp_path / "run" / "medqa" / "full"
    rd = RunDir(cell)
    config = {"benchmark": {"loader": "medqa", "options": {}}, "index_dir": str(index)}
    rd.write_json(rd.manifest, {"config": config})
    rd.write_questions([q, q2])
    rd.write_golds([g, g2])
    quote = {"doc_id": "pm:1#0", "quote": doc[:60]}
    trace = [{"tool": "enable_search", "documents": [{"id": "pm:1#0", "text": doc}], "question": q.text}]
    rd.append_predictions(
        [Prediction(q.id, "medqa", "A", raw="I pick A: " + q.text[:50], trace=trace, evidence=[quote])]
    )
    # An answer quoting a document that only its trace names.
    trace2 = [{"tool": "enable_search", "documents": [{"id": "pm:1#0", "text": doc}]}]
    rd.append_predictions([Prediction(q2.id, "medqa", "INVALID", raw="As read: " + doc[10:70], trace=trace2)])

    out, back = tmp_path / "portable", tmp_path / "back"
    assert main(["export", str(tmp_path / "run"), str(out), "--data-root", str(data_root)]) == 0
    sources = [q.text, *(q.options or {}).values(), q2.text, doc]
    for f in out.rglob("*.jsonl"):
        rows = [json.loads(x) for x in f.read_text().splitlines()]
        assert _copied_runs(rows, sources, 24) == [], f
    assert (out / "medqa/full/traces.portable.jsonl").exists()
    assert main(["restore", str(out), str(back), "--data-root", str(data_root)]) == 0
    restored = restore_run(out, tmp_path / "back3", qa_sources(str(data_root), None), row_files=QA_FILES)
    assert [f.path for f in restored].count("medqa/full/traces.portable.jsonl") == 1
    for name in ("predictions.jsonl", "questions.jsonl", "golds.jsonl", "traces/" + rd.trace_path(q.id).name):
        assert (back / "medqa/full" / name).read_bytes() == (cell / name).read_bytes(), name
    assert main(["restore", str(out), str(back), "--data-root", str(data_root)]) == 0  # again: nothing added
    assert (back / "medqa/full/predictions.jsonl").read_bytes() == (cell / "predictions.jsonl").read_bytes()
    # Without the index, the quote cannot come back: an error, never a wrong row.
    assert main(["restore", str(out), str(tmp_path / "b2"), "--index-dir", str(tmp_path / "none")]) == 2


def test_a_qa_row_whose_item_is_not_in_the_benchmark_is_not_exported(tmp_path: Path, data_root: Path) -> None:
    from medagent.run import RunDir
    from medagent.types import Prediction

    rd = RunDir(tmp_path / "run")
    rd.write_json(rd.manifest, {"config": {"benchmark": {"loader": "medqa", "options": {}}, "index_dir": ""}})
    rd.append_predictions([Prediction("not-an-item", "medqa", "A", raw="a long reply that quotes something")])
    assert main(["export", str(rd.root), str(tmp_path / "p"), "--data-root", str(data_root)]) == 2
    assert not (tmp_path / "p" / "predictions.jsonl").exists()
