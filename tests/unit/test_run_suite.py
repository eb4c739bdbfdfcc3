"""The suite's plan without Ray: cells expanded and composed exactly as ``run_benchmark -m`` would."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from medagent.config import RunConfig, SuiteRunConfig
from medagent.llm.endpoints import Endpoints, HttpEndpoint
from medagent.run import ConfigDriftError, RunDir
from medagent.types import Prediction
from pipelines.benchmark_run import absolute_paths
from pipelines.run_suite import (
    Cell,
    deployment_groups,
    expand_sweep,
    format_summary,
    is_complete,
    plan_from_overrides,
    suite_dir,
)

CONF = Path(__file__).resolve().parents[2] / "conf"
# What the fake deploy hands to every cell.
FAKE_LLM = HttpEndpoint("http://fake/v1")


def _plan(*overrides: str) -> tuple[SuiteRunConfig, list[Cell]]:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return plan_from_overrides(list(overrides))


def _run_cfg(*overrides: str) -> RunConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return absolute_paths(OmegaConf.to_object(compose(config_name="config", overrides=list(overrides))))  # type: ignore[arg-type]


def test_suite_config_has_the_run_configs_defaults() -> None:
    """conf/run_suite.yaml repeats config.yaml's defaults list: the shared part must compose the same."""
    for overrides in ([], ["experiment=table1_mc", "llm=smollm2-135m-cpu", "limit=3"]):
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            s = OmegaConf.to_object(compose(config_name="run_suite", overrides=overrides))
            r = OmegaConf.to_object(compose(config_name="config", overrides=overrides))
        assert isinstance(s, SuiteRunConfig) and isinstance(r, RunConfig)
        assert {k: v for k, v in asdict(s).items() if k != "suite"} == asdict(r)
        assert not s.suite.continue_on_error and s.suite.report


def test_table1_cells_are_the_multirun_jobs() -> None:
    suite, cells = _plan(
        "experiment=table1_mc", "limit=3", "llm=smollm2-135m-cpu", "suite.continue_on_error=true"
    )
    assert suite.suite.continue_on_error and suite.limit == 3
    assert len(cells) == 10
    assert [c.label for c in cells[:2]] == [
        "benchmark=usmle_step1 agent=full",
        "benchmark=usmle_step1 agent=standalone",
    ]
    for cell in cells:
        # Every cell is config.yaml composed with the shared overrides + its values: same run_dir as `-m`.
        bench, agent = (o.split("=")[1] for o in cell.overrides[:2])
        expected = _run_cfg(
            "experiment=table1_mc", "limit=3", "llm=smollm2-135m-cpu", f"benchmark={bench}", f"agent={agent}"
        )
        assert cell.cfg == expected
        assert cell.cfg.run_dir == str(
            Path(f"outputs/experiments/table1_mc/smollm2-135m-cpu/{bench}-{agent}").resolve()
        )
        assert not any(o.startswith("suite.") for o in cell.overrides)
    assert suite_dir(cells) == Path("outputs/experiments/table1_mc/smollm2-135m-cpu").resolve()


def test_overrides_narrow_the_sweep() -> None:
    _, cells = _plan("experiment=table1_mc", "benchmark=medqa")
    assert [c.label for c in cells] == ["agent=full", "agent=standalone"]
    _, cells = _plan("experiment=table3_ablation", "hydra.sweeper.params.benchmark='medqa,pubmedqa'")
    assert len(cells) == 8 and {c.cfg.benchmark.name for c in cells} == {"medqa", "pubmedqa"}
    _, cells = _plan("experiment=fig3_topr_sweep", "benchmark=medqa", "agent.retrieval.top_r=4")
    [cell] = cells
    assert cell.cfg.agent.retrieval.top_r == 4 and str(cell.cfg.run_dir).endswith("medqa-full-r4")
    # A one-cell suite writes its report beside the run dir, not into it.
    assert suite_dir(cells) == Path(str(cell.cfg.run_dir)).parent


def test_expand_sweep_follows_the_basic_sweeper() -> None:
    cells = expand_sweep(
        {"benchmark": "a,b", "agent": "full,standalone"}, ["agent=full", "limit=3", "seed=1,2"]
    )
    assert cells == [
        ["benchmark=a", "agent=full", "limit=3", "seed=1"],
        ["benchmark=a", "agent=full", "limit=3", "seed=2"],
        ["benchmark=b", "agent=full", "limit=3", "seed=1"],
        ["benchmark=b", "agent=full", "limit=3", "seed=2"],
    ]
    assert expand_sweep({}, []) == [[]]


def test_a_suite_without_per_cell_run_dirs_is_refused() -> None:
    with pytest.raises(ValueError, match="no run_dir"):
        _plan("benchmark=medqa")
    with pytest.raises(ValueError, match="share run_dir"):
        _plan("experiment=table1_mc", "run_dir=/tmp/one")


def test_a_test_experiment_can_come_from_a_search_path(tmp_path: Path) -> None:
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "tiny.yaml").write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n      benchmark: medqa,usmle_step1\n"
        "run_dir: ${outputs_root}/tiny/${benchmark.name}-${agent.mode}\n"
    )
    _, cells = _plan(f"hydra.searchpath=[file://{tmp_path}]", "experiment=tiny", f"outputs_root={tmp_path}")
    assert [c.cfg.run_dir for c in cells] == [
        str(tmp_path / "tiny/medqa-standalone"),
        str(tmp_path / "tiny/usmle_step1-standalone"),
    ]


def test_one_deployment_for_the_cells_that_share_an_llm() -> None:
    _, cells = _plan("experiment=table1_mc", "benchmark=medqa")
    [(served, group)] = deployment_groups(cells)
    assert served.agent.mode == "full" and len(group) == 2  # the searching app serves standalone too
    _, cells = _plan("experiment=table1_mc", "benchmark=medqa", "agent=standalone")
    other = replace(cells[0], cfg=replace(cells[0].cfg, llm=replace(cells[0].cfg.llm, name="other")))
    groups = deployment_groups([cells[0], other])
    assert len(groups) == 2 and all(s.agent.mode == "standalone" for s, _ in groups)


def test_complete_means_every_question_answered_then_scored(tmp_path: Path) -> None:
    src = tmp_path / "q.jsonl"
    rows = [
        {"id": f"q{i}", "question": "?", "options": {"A": "x", "B": "y"}, "answer": "A"} for i in range(2)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = _run_cfg("benchmark=jsonl", f"benchmark.options.path={src}", f"run_dir={tmp_path / 'run'}")
    assert not is_complete(cfg)
    rd = RunDir(tmp_path / "run")
    rd.append_predictions([Prediction(id="q0", benchmark="jsonl", answer="A")])
    rd.write_json(rd.metrics, {"n": 1})
    assert not is_complete(cfg)  # q1 is missing
    rd.append_predictions([Prediction(id="q1", benchmark="jsonl", answer="B")])
    past = time.time() - 60
    os.utime(rd.metrics, (past, past))
    assert not is_complete(cfg)  # answered, but stopped before scoring
    rd.write_json(rd.metrics, {"n": 2, "accuracy": 0.5})
    assert is_complete(cfg)
    # A finished cell asked for again under other settings is refused, never reported as done.
    rd.write_json(rd.manifest, {"config": json.loads(json.dumps(asdict(cfg), default=str))})
    assert is_complete(cfg)
    with pytest.raises(ConfigDriftError, match="agent.retrieval.top_r"):
        is_complete(
            replace(
                cfg,
                agent=replace(
                    cfg.agent, retrieval=replace(cfg.agent.retrieval, top_r=cfg.agent.retrieval.top_r + 1)
                ),
            )
        )
    cell = Cell(["benchmark=jsonl"], cfg, label="benchmark=jsonl", status="skipped", predictions=2)
    assert "1 skipped of 1 cells" in format_summary([cell])


def _fake_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: str) -> list[Cell]:
    """Three one-question cells; the cell whose run dir ends with ``fail`` exceeds its error budget."""
    import contextlib

    import pipelines.run_suite as rs
    from pipelines.common import ErrorBudgetExceeded

    tmp_path.mkdir(exist_ok=True)
    src = tmp_path / "q.jsonl"
    src.write_text(
        json.dumps({"id": "q0", "question": "?", "options": {"A": "x", "B": "y"}, "answer": "A"}) + "\n"
    )

    def fake_run(cfg: RunConfig, endpoints: object) -> dict[str, object]:
        assert endpoints == Endpoints(FAKE_LLM, None)  # deployed once, handed to every cell
        rd = RunDir(str(cfg.run_dir))
        rd.append_predictions([Prediction(id="q0", benchmark="jsonl", answer="A")])
        if str(cfg.run_dir).endswith(fail):
            raise ErrorBudgetExceeded("1 of 1 questions failed")
        rd.write_json(rd.metrics, {"n": 1, "accuracy": 1.0})
        return {"accuracy": 1.0}

    def fake_deploy(needs: object) -> Endpoints:
        return Endpoints(FAKE_LLM, None)

    monkeypatch.setattr(rs, "ray_session", lambda cluster: contextlib.nullcontext())
    monkeypatch.setattr(rs, "deploy", fake_deploy)
    monkeypatch.setattr(rs, "run_cell", fake_run)
    cells = []
    for name in ("a", "b", "c"):
        cfg = _run_cfg(
            "benchmark=jsonl", f"benchmark.options.path={src}", f"run_dir={tmp_path / 'suite' / name}"
        )
        cells.append(Cell([f"run_dir={name}"], cfg, label=name))
    return cells


def test_a_cell_over_its_error_budget_stops_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from medagent.config import SuiteConfig
    from pipelines.run_suite import SuiteStopped, run_suite

    cells = _fake_suite(tmp_path, monkeypatch, fail="b")
    with pytest.raises(
        SuiteStopped, match=r"(?s)cell \[b\] failed: ErrorBudgetExceeded.*rerun the same command"
    ):
        run_suite(SuiteConfig(report=False), cells)
    summary = json.loads((tmp_path / "suite" / "suite.json").read_text())
    assert [c["status"] for c in summary["cells"]] == ["done", "failed", "not run"]
    assert summary["cells"][1]["predictions"] == 1  # what the failed cell answered is kept

    cells = _fake_suite(tmp_path / "go_on", monkeypatch, fail="b")
    summary = run_suite(SuiteConfig(report=False, continue_on_error=True), cells)
    assert [c["status"] for c in summary["cells"]] == ["done", "failed", "done"]
