"""``python -m medagent.history.evaluation.explain``: an asking arm's turns with the policy's reasons, and what
grounding refused, read from a run dir written by the real writers."""

from __future__ import annotations

from pathlib import Path

import pytest

from medagent.history.evaluation.explain import main
from tests.unit._view_fakes import REFUSAL, write_interview_run


def test_prints_each_turn_with_its_reason_and_the_refusals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_interview_run(tmp_path)
    main([str(run)])
    out = capsys.readouterr().out
    assert out.startswith("# iv-1 (")
    assert (
        "turn 0 [triage, symptom] why: opening" in out and "  Doctor: Hello, what brings you in today?" in out
    )
    assert "refused by grounding: 1" in out
    assert (
        f"turn 2: red_flag haemoptysis = 'haemoptysis' on \"{REFUSAL['quote']}\": {REFUSAL['reason']}" in out
    )
    main([str(run), "--refused"])
    assert "Doctor:" not in capsys.readouterr().out


def test_a_missing_interview_or_run_dir_is_a_clear_error(tmp_path: Path) -> None:
    run = write_interview_run(tmp_path)
    with pytest.raises(SystemExit, match="no such interview in .*: nope"):
        main([str(run), "--id", "nope"])
    with pytest.raises(SystemExit, match="holds no interviews.jsonl"):
        main([str(tmp_path)])
