"""The benchmark CLI fed bad input (finding 10 of the edge review): no valid question, a missing file, a
run_dir that is a file or cannot be written each end in one ``error:`` line and exit status 2, before Ray
starts and before a run directory exists; a closed-set typo fails at compose for every agent mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from medagent.config import RunConfig
from pipelines.benchmark_run import absolute_paths, run
from pipelines.common import UsageError, register_configs, usage_errors

CONF = Path(__file__).resolve().parents[2] / "conf"
AGENTS = sorted(p.stem for p in (CONF / "agent").glob("*.yaml"))
register_configs()


def _compose(*overrides: str) -> RunConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return absolute_paths(OmegaConf.to_object(cfg))  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("Ray started for a run that should have been refused")

    monkeypatch.setattr("pipelines.benchmark_run._answer_with_ray", refuse)


def refused(cfg: RunConfig, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info, usage_errors():
        run(cfg)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err  # one line, no traceback
    return err


def test_no_valid_question_says_no_questions_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty, bad = tmp_path / "empty.jsonl", tmp_path / "bad.jsonl"
    empty.write_text("")
    bad.write_text('{"id": "1", "question": "no options"}\nnot json\n')
    for data in (empty, bad):
        run_dir = tmp_path / f"run-{data.stem}"
        cfg = _compose("benchmark=jsonl", f"benchmark.options.path={data}", f"run_dir={run_dir}")
        err = refused(cfg, capsys)
        assert "no questions" in err and "accuracy" not in err
        assert not run_dir.exists()
    assert "2 malformed rows" in err


def test_file_and_run_dir_mistakes_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "1", "question": "Q?", "options": {"A": "a", "B": "b"}, "answer": "A"}\n')
    missing = _compose("benchmark=jsonl", f"benchmark.options.path={tmp_path / 'nope.jsonl'}")
    assert "nope.jsonl" in refused(missing, capsys)
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    cfg = _compose("benchmark=jsonl", f"benchmark.options.path={data}", f"run_dir={a_file}")
    assert "is a file" in refused(cfg, capsys)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    monkeypatch.setattr("os.access", lambda path, mode: Path(path) != read_only)  # root ignores chmod
    cfg = _compose("benchmark=jsonl", f"benchmark.options.path={data}", f"run_dir={read_only / 'run'}")
    assert "not writable" in refused(cfg, capsys)
    assert not (read_only / "run").exists()


def test_holding_out_evidence_a_benchmark_does_not_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "1", "question": "Q?", "options": {"A": "a", "B": "b"}, "answer": "A"}\n')
    run_dir = tmp_path / "run"
    cfg = _compose(
        "agent=full_held_out", "benchmark=jsonl", f"benchmark.options.path={data}", f"run_dir={run_dir}"
    )
    err = refused(cfg, capsys)
    assert "1 of 1 questions of jsonl name no source article to hold out" in err and not run_dir.exists()


def test_our_own_bugs_are_not_usage_errors() -> None:
    with pytest.raises(KeyError), usage_errors():
        raise KeyError("a bug")
    assert issubclass(UsageError, Exception) and not issubclass(UsageError, (OSError, ValueError))


@pytest.mark.parametrize("agent", AGENTS)
def test_a_closed_set_typo_fails_at_compose_for_every_mode(agent: str) -> None:
    with pytest.raises(ConfigCompositionException) as exc_info:
        _compose(f"agent={agent}", "agent.loop.memory=cahce")
    assert "cache_prune" in str(exc_info.value.__cause__)  # the allowed values, named
