"""The network pipeline on real Ray: null samples as Ray tasks give the same numbers as the serial run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from medagent.config import ClusterConfig
from medagent.network.analysis import NetworkAnalysisConfig, analyze
from pipelines.analyze_network import AnalyzeNetworkConfig, run
from tests.unit._netref import synthetic_annotations

pytestmark = pytest.mark.integration

FAST = NetworkAnalysisConfig(
    null_samples=40,
    null_batch_size=10,
    modularity_restarts=3,
    modularity_null_samples=12,
    modularity_null_batch_size=4,
    curveball_burnin=200,
    curveball_thin=5,
    cv_folds=5,
    kl_null_samples=12,
    phase_null_samples=12,
    # Few nulls keep the Ray-vs-serial check fast; its p-values are compared, never reported.
    min_null_samples=12,
)


def test_ray_tasks_match_serial_and_pipeline_writes_run_dir(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path: Path
) -> None:
    from actors.network_tasks import ray_map

    anns = synthetic_annotations(36, seed=1)
    serial = analyze(anns, FAST)
    on_ray = analyze(anns, FAST, map_fn=ray_map)
    for model, s in serial.nulls.items():
        np.testing.assert_array_equal(s.samples, on_ray.nulls[model].samples)
    assert serial.modularity_null is not None and on_ray.modularity_null is not None
    np.testing.assert_array_equal(serial.modularity_null.samples, on_ray.modularity_null.samples)
    assert repr(serial.modularity_null.to_dict()) == repr(on_ray.modularity_null.to_dict())  # NaN z

    src = tmp_path / "annotations.jsonl"
    src.write_text("".join(json.dumps(a.to_dict()) + "\n" for a in anns) + "{broken\n")
    cfg = AnalyzeNetworkConfig(
        annotations=str(tmp_path),
        run_dir=str(tmp_path / "run"),
        cluster=cluster_cfg,
        network=FAST,
        use_ray=True,
    )
    out = run(cfg)  # joins the session's Ray cluster and leaves it running
    root = Path(out["run_dir"])
    assert out["rejected"] == 1 and out["n_interviews"] == 36
    assert out["nulls"]["curveball"]["mean"] == pytest.approx(float(serial.nulls["curveball"].samples.mean()))
    assert (root / "figures" / "nodf_nulls.png").exists() and (root / "report.md").exists()
    assert out["modularity_null"]["p"] == pytest.approx(serial.modularity_null.p_greater)
    assert json.loads((root / "manifest.json").read_text())["config"]["network"]["null_samples"] == 40
    assert ray_cluster.is_initialized()
