from pathlib import Path

from medagent.run import RunDir, build_manifest
from medagent.types import Gold, Prediction, Rejected


def _p(i: str) -> Prediction:
    return Prediction(id=i, benchmark="t", answer="A", trace=[{"step": 0, "kind": "final_answer"}])


def test_append_resume_and_no_duplicates(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "run")
    assert rd.append_predictions([_p("a"), _p("b")]) == 2
    assert rd.append_predictions([_p("b"), _p("c")]) == 1  # "b" was already committed
    reopened = RunDir(tmp_path / "run")
    assert reopened.completed_ids() == {"a", "b", "c"}
    preds = reopened.load_predictions(with_traces=True)
    assert [p.id for p in preds] == ["a", "b", "c"]
    assert preds[0].trace == [{"step": 0, "kind": "final_answer"}]
    # predictions.jsonl stays lean: traces live in their own files
    assert '"trace"' not in rd.predictions.read_text()


def test_partial_last_line_from_a_kill_is_dropped(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    rd.append_predictions([_p("a")])
    with open(rd.predictions, "a") as f:
        f.write('{"id": "b", "benchm')  # process killed mid-write
    rd2 = RunDir(tmp_path)
    assert rd2.completed_ids() == {"a"}
    rd2.append_predictions([_p("b")])
    assert rd2.completed_ids() == {"a", "b"}


def test_golds_rejected_and_manifest(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    rd.write_golds([Gold(id="a", answer="B", answer_text="x")])
    assert rd.load_golds()["a"].answer == "B"
    assert rd.write_rejected([Rejected(benchmark="t", row=3, reason="empty question")]) == 1
    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    m1 = build_manifest({"limit": 3}, [data])
    m2 = build_manifest({"limit": 3}, [data], previous=m1)
    assert len(m2["history"]) == 2
    assert m2["data_checksums"][str(data)] == m1["data_checksums"][str(data)]
    assert "ray" in m2["packages"] and m2["config"] == {"limit": 3}
    # The wording of the run: every prompt's version and file checksum.
    assert m2["prompts"]["qa_agent"]["version"] >= 1 and len(m2["prompts"]["qa_agent"]["sha256"]) == 64


def test_create_names_a_fresh_dir(tmp_path: Path) -> None:
    rd = RunDir.create(None, tmp_path, "medqa-standalone")
    assert rd.root.parent == (tmp_path / "medqa-standalone").resolve()


def test_read_only_open_touches_nothing(tmp_path: Path) -> None:
    assert not RunDir(tmp_path / "absent", read_only=True).root.exists()
    rd = RunDir(tmp_path / "run")
    rd.append_predictions([_p("a")])
    with open(rd.predictions, "a") as f:
        f.write('{"id": "b", "benchm')  # a running process mid-write
    before = rd.predictions.read_bytes()
    reader = RunDir(tmp_path / "run", read_only=True)
    assert [p.id for p in reader.load_predictions()] == ["a"]
    assert rd.predictions.read_bytes() == before  # the writer's partial line is left alone


def test_an_endpoint_failure_is_asked_again_and_superseded(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "run")
    failed = Prediction(id="b", benchmark="t", answer="INVALID", error="LLMError: replica restarting")
    assert rd.append_predictions([_p("a"), failed]) == 2
    assert rd.completed_ids() == {"a"}  # "b" is not done: a rerun asks it again
    assert rd.append_predictions([_p("b")]) == 1
    assert rd.append_predictions([_p("b")]) == 0  # now answered for good
    preds = RunDir(tmp_path / "run").load_predictions()
    assert [(p.id, p.error) for p in preds] == [("a", None), ("b", None)]  # the failure is superseded


def test_a_later_failure_never_replaces_an_answer(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "run")
    rd.append_predictions([_p("a")])
    rd.append_predictions([Prediction(id="a", benchmark="t", answer="INVALID", error="LLMError: x")])
    assert [p.error for p in rd.load_predictions()] == [None]


def test_records_with_failures_are_redone_and_superseded(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "run")
    path = rd.root / "rows.jsonl"

    def failed(r: dict[str, object]) -> bool:
        return bool(r.get("error"))

    assert (
        rd.append_records(path, [{"id": "x", "v": 1}, {"id": "y", "error": "LLMError"}], failed=failed) == 2
    )
    assert rd.completed_keys(path, failed=failed) == {"x"}
    assert rd.completed_keys(path) == {"x", "y"}  # without a failure rule every record counts
    assert rd.append_records(path, [{"id": "x", "v": 9}, {"id": "y", "v": 2}], failed=failed) == 1
    assert rd.latest_records(path, failed=failed) == [{"id": "x", "v": 1}, {"id": "y", "v": 2}]


def test_a_whole_last_record_without_its_newline_is_kept_and_a_cut_one_dropped(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "run")
    path = rd.root / "rows.jsonl"
    path.write_text('{"id": "x"}\n{"id": "y"}')  # the record was written, its newline was not
    assert rd.completed_keys(path) == {"x", "y"}
    assert rd.append_records(path, [{"id": "y"}, {"id": "z"}]) == 1
    assert rd.load_records(path) == [{"id": "x"}, {"id": "y"}, {"id": "z"}]
    with open(path, "a") as f:
        f.write('{"id": "w", "v"')  # cut short by a kill
    assert rd.append_records(path, [{"id": "w"}]) == 1
    assert path.read_text().splitlines()[-1] == '{"id": "w"}'


def test_a_record_holding_a_unicode_line_separator_reads_back(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "run")
    path = rd.root / "rows.jsonl"
    odd = "a\u2028b\u2029c\x85d"  # json.dumps(ensure_ascii=False) writes these unescaped
    rd.append_records(path, [{"id": "x", "text": odd}, {"id": "y"}])
    assert rd.load_records(path) == [{"id": "x", "text": odd}, {"id": "y"}]
    rd.append_predictions([Prediction(id="q", benchmark="t", answer="A", raw=odd)])
    assert RunDir(rd.root).load_predictions()[0].raw == odd
