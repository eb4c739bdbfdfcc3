"""The command line (``python -m medagent.network``) and the pipeline's config, without Ray."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from medagent.network.__main__ import main
from tests.unit._netref import NETREF, REPO, expected, needs_netref


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@needs_netref
def test_nodf_command(capsys: pytest.CaptureFixture[str]) -> None:
    ref = expected()["nodf"]["Safariland_binary"]
    out = _run(["nodf", str(NETREF / "Safariland.csv")], capsys)
    assert out["nodf"] == pytest.approx(ref["order_TRUE"]["NODF"], abs=1e-6)
    assert out["n_row"] == pytest.approx(ref["order_TRUE"]["N_row"], abs=1e-6)
    out = _run(["nodf", str(NETREF / "Safariland.csv"), "--no-sort"], capsys)
    assert out["n_col"] == pytest.approx(ref["order_FALSE"]["N_col"], abs=1e-6)


@needs_netref
def test_modularity_command(capsys: pytest.CaptureFixture[str]) -> None:
    ref = expected()["barber_modularity"]
    m = str(NETREF / "Safariland.csv")
    out = _run(["modularity", m, "--restarts", "5", "--seed", "1"], capsys)
    assert out["Q"] >= ref["Safariland_binary"]["Q"] - 1e-9 and out["modules"] == 6
    out = _run(
        ["modularity", m, "--weighted", "--partition", str(NETREF / "partition_Safariland_weighted.csv")],
        capsys,
    )
    assert out == {
        "Q": pytest.approx(ref["Safariland_weighted"]["Q"], abs=1e-9),
        "modules": 5,
        "weighted": True,
    }


@needs_netref
def test_markov_command(capsys: pytest.CaptureFixture[str]) -> None:
    ref = expected()["markov_order"]["koeberg_wind"]
    out = _run(["markov", str(NETREF / "koeberg_wind.csv"), "--max-order", "3", "--start", "14"], capsys)
    assert [o["npar_full"] for o in out["orders"]] == ref["computed_exact"]["npar_full"]
    assert [round(o["bic"], 2) for o in out["orders"]] == ref["computed_exact"]["BIC_full"]
    assert out["selected"]["bic"] == 1 and out["selected"]["aic"] == 2


def test_markov_command_keeps_sequences_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "seq.csv"
    f.write_text("sequence_id,state\n1,A\n1,A\n2,B\n2,B\n")
    out = _run(["markov", str(f), "--max-order", "1"], capsys)
    assert out["n"] == 2 and out["orders"][1]["loglik"] == 0.0  # no A->B transition between sequences


def test_bad_input_is_an_error_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "m.csv"
    f.write_text(",a,b\nr1,1\n")
    assert main(["nodf", str(f)]) == 2
    assert "cells" in capsys.readouterr().err


def test_help_runs_as_a_module() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "medagent.network", "modularity", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert "--partition" in out.stdout and "--restarts" in out.stdout


def test_pipeline_config_composes_and_runs_serially(tmp_path: Path) -> None:
    from pipelines.analyze_network import AnalyzeNetworkConfig, register_configs, run

    register_configs()
    ann = tmp_path / "annotations.jsonl"
    from tests.unit._netref import synthetic_annotations

    ann.write_text("".join(json.dumps(a.to_dict()) + "\n" for a in synthetic_annotations(30)))
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="analyze_network",
            overrides=[
                f"annotations={tmp_path}",
                f"run_dir={tmp_path / 'run'}",
                "use_ray=false",
                "network.null_samples=20",
                "network.null_batch_size=10",
                "network.modularity_restarts=2",
                "network.modularity_null_samples=10",
                "network.min_null_samples=0",
                "network.phase_null_samples=5",
                "network.curveball_burnin=100",
            ],
        )
    run_cfg = OmegaConf.to_object(cfg)
    assert isinstance(run_cfg, AnalyzeNetworkConfig) and run_cfg.network.null_models == [
        "r00",
        "r1",
        "curveball",
    ]
    out = run(run_cfg)
    root = Path(out["run_dir"])
    assert (
        (root / "report.md").exists()
        and (root / "manifest.json").exists()
        and (root / "metrics.json").exists()
    )
    assert out["n_interviews"] == 30 and out["rejected"] == 0
    assert out["modularity_null"]["n"] == 10 and out["modularity_null"]["model"] == "curveball"
