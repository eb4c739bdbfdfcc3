"""Integration tier: one real local Ray cluster per test session (starting Ray costs seconds)."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from medagent.config import ClusterConfig
from tests.configs import cluster_config


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (Debian's chromium + chromedriver, and selenium), or None."""
    for exe in ("chromium", "chromedriver"):
        if shutil.which(exe) is None:
            return f"{exe} not found on PATH (Debian: apt-get install chromium chromium-driver; `make browser-deps`)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def cluster_cfg() -> ClusterConfig:
    # metrics_export_port: tests/integration/test_metrics.py scrapes the Prometheus endpoint.
    return cluster_config(
        num_cpus=4, http_port=_free_port(), batch_size=2, num_workers=1, metrics_export_port=_free_port()
    )


@pytest.fixture(scope="session")
def ray_cluster(cluster_cfg: ClusterConfig) -> Iterator[Any]:
    from actors.builder import ray_init_kwargs

    kwargs = ray_init_kwargs(cluster_cfg)
    assert os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0"
    # Workers report metrics every 10 s by default; a worker pool ended sooner after its last observation
    # may never export it. A 1 s report interval keeps test_metrics' scrape from racing the pool's end.
    os.environ.setdefault("RAY_metrics_report_interval_ms", "1000")
    import ray

    already = ray.is_initialized()
    ray.init(**kwargs)
    # ignore_reinit_error would silently keep a Ray that something else started (default CPUs): the
    # replicas sized for this cluster would then wait forever for CPUs. Fail at once instead.
    assert not already and ray.cluster_resources().get("CPU") == cluster_cfg.ray.num_cpus, (
        f"Ray was already running ({ray.cluster_resources()}), not the test cluster; a test left it behind"
    )
    from ray import serve

    serve.start(http_options={"host": cluster_cfg.serve.http_host, "port": cluster_cfg.serve.http_port})
    yield ray
    serve.shutdown()
    ray.shutdown()


@pytest.fixture(scope="session")
def qa_index(ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path_factory: pytest.TempPathFactory,
             data_root: Any) -> Any:  # fmt: skip
    """A small real index (MiniLM, FAISS flat + BM25) over MedQuAD's GARD and PubMedQA records."""
    from pathlib import Path

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from pipelines.index_corpus import register_index_configs
    from pipelines.index_corpus import run as build_index

    register_index_configs()
    out = tmp_path_factory.mktemp("qa_index")
    conf = Path(__file__).resolve().parents[2] / "conf"
    overrides = [f"out_dir={out}", f"data_root={data_root}", "limit=40", "shard_size=64", "progress=false",
                 "+corpus.sources.0.options.subsets=[GARD]"]  # fmt: skip
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = OmegaConf.to_object(compose(config_name="index_corpus", overrides=overrides))
    cfg.cluster = cluster_cfg  # type: ignore[attr-defined]
    build_index(cfg)  # type: ignore[arg-type]
    return out


def clear_serve_apps() -> None:
    """Deletes every Serve application: pipelines run earlier in the session leave theirs on "/"."""
    from ray import serve

    for name in list(serve.status().applications):
        serve.delete(name)


def one_dialogue_data_root(tmp_path: Any, data_root: Any, interview: str = "RES0006", turns: int = 3) -> Any:
    """A data root holding one short real interview (its first ``turns`` turns) beside MediTOD's sample,
    for the LLM annotator: returns (data root, the interview)."""
    from medagent.interview.transcripts import load_transcripts

    root = tmp_path / "data"
    (root / "fareez_osce_transcripts").mkdir(parents=True)
    (root / "meditod_public_sample").symlink_to(data_root / "meditod_public_sample")
    [iv], _ = load_transcripts(ids=[interview], data_root=data_root)
    text = "\n\n".join(f"{t.speaker[0].upper()}: {t.text}" for t in iv.turns[:turns])
    (root / "fareez_osce_transcripts" / f"{interview}.txt").write_text(text)
    return root, iv


def llm_annotator() -> Any:
    """The LLM annotator sized for a 135M model: short, capped replies keep its constrained output valid."""
    from medagent.config import AnnotatorConfig

    return AnnotatorConfig(kind="llm", max_chunk_tokens=400, max_tokens=120, max_findings=2, max_diagnoses=1,
                           list_symptoms_in_prompt=False, max_concurrency=1)  # fmt: skip
