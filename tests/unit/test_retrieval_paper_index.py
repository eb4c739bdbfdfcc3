"""The paper's index, buildable: NEJM optional and named when missing, no BM25 for the dense recipe (and a
run that needs it refused), SPECTER in fp16 on GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from actors.deploy import Needs, check_index
from medagent.config import LLMConfig, RetrieverConfig
from medagent.retrieval import embedders
from medagent.retrieval.build import SourceChunkStats, build_indexes, write_index_manifest
from medagent.retrieval.config import EmbedderConfig, IndexJobConfig
from medagent.retrieval.embedders import Embedder, use_half
from medagent.retrieval.layout import IndexLayout
from pipelines.index_corpus import register_index_configs
from tests.configs import cluster_config

CONF = Path(__file__).resolve().parents[2] / "conf"


def _job(*overrides: str) -> IndexJobConfig:
    register_index_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="index_corpus", overrides=["out_dir=/x", *overrides])
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def test_paper_six_takes_nejm_as_optional() -> None:
    cfg = _job("corpus=paper_six", "embedder=specter", "index.bm25=false")
    assert [s.name for s in cfg.corpus.sources if s.optional] == ["nejm"]
    assert cfg.index.kind == "flat" and cfg.index.bm25 is False and cfg.embedder.metric == "l2"


def test_a_missing_optional_source_is_named_in_the_manifest(tmp_path: Path) -> None:
    cfg = _job("corpus=paper_six", "index.bm25=false", f"out_dir={tmp_path}")
    layout = IndexLayout(tmp_path)
    why = "optional source not supplied: source 'nejm': no file or folder at /data/nejm"
    sources = build_indexes(cfg, layout, {"nejm": SourceChunkStats("nejm", missing=why)})
    manifest = write_index_manifest(cfg, layout, sources, {}, None, "fp")
    assert manifest["missing_sources"] == {"nejm": why}
    assert manifest["sources"]["nejm"]["index"] is None and manifest["totals"]["vectors"] == 0
    assert json.loads(layout.manifest.read_text())["missing_sources"] == {"nejm": why}


def _index(tmp_path: Path, bm25: bool) -> str:
    (tmp_path / "manifest.json").write_text(json.dumps({"config": {"index": {"bm25": bm25}}}))
    return str(tmp_path)


def test_a_run_needing_bm25_is_refused_on_an_index_without_it(tmp_path: Path) -> None:
    cluster = cluster_config()
    hybrid = Needs(
        LLMConfig(), cluster, RetrieverConfig(), index_dir=_index(tmp_path, False), missing_index="build"
    )
    with pytest.raises(ValueError, match="needs BM25, but the index .* was built without it"):
        check_index(hybrid)
    dense = RetrieverConfig(name="dense", mode="dense")  # type: ignore[arg-type]
    check_index(Needs(LLMConfig(), cluster, dense, index_dir=_index(tmp_path, False), missing_index="build"))
    check_index(
        Needs(LLMConfig(), cluster, RetrieverConfig(), index_dir=_index(tmp_path, True), missing_index="b")
    )


def test_fp16_on_cuda_only() -> None:
    specter = _job("embedder=specter").embedder
    assert use_half(specter, "cuda") and use_half(specter, "cuda:1")
    assert not use_half(specter, "cpu")
    assert not use_half(EmbedderConfig(half_on_gpu=False), "cuda")


class _FakeST:
    def __init__(self) -> None:
        self.halved = False

    def get_embedding_dimension(self) -> int:
        return 768

    def half(self) -> _FakeST:
        self.halved = True
        return self


@pytest.mark.parametrize(("device", "halved"), [("cuda", True), ("cpu", False)])
def test_the_embedder_halves_its_model_on_cuda(
    monkeypatch: pytest.MonkeyPatch, device: str, halved: bool
) -> None:
    def load(*args: Any, **kwargs: Any) -> _FakeST:
        return _FakeST()

    monkeypatch.setattr(embedders, "load_sentence_transformer", load)
    specter = _job("embedder=specter").embedder
    assert Embedder(specter, device=device)._doc_model.halved is halved
