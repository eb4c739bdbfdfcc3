"""The indexing pipeline end to end on real Ray Data with the real MiniLM model and the shared data:
kill-and-resume gives the same index, malformed records are set aside and counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from medagent.config import ClusterConfig
from medagent.retrieval.config import IndexJobConfig, SourceConfig
from medagent.retrieval.embedders import Embedder
from medagent.retrieval.layout import IndexLayout, read_shard
from medagent.retrieval.search import Searcher
from pipelines.index_corpus import register_index_configs, run

pytestmark = pytest.mark.integration

CONF = Path(__file__).resolve().parents[2] / "conf"
QUERIES = {
    "q1": "What are the symptoms of a rare genetic disease?",
    "q2": "Does smoking increase the risk of postoperative complications?",
    "q3": "Which gene mutations cause muscular dystrophy?",
}
register_index_configs()


SLICE = ("+corpus.sources.0.options.subsets=[GARD]", "+corpus.sources.2.options.tasks=[11]")


def _cfg(out_dir: Path, data_root: Path, cluster: ClusterConfig, *overrides: str) -> IndexJobConfig:
    """The real default corpus cut to ~150 chunks (30 GARD answers, 30 PubMedQA abstracts, 30 BioASQ
    snippets) unless ``overrides`` pick another corpus."""
    base = [f"out_dir={out_dir}", f"data_root={data_root}", "limit=30", "shard_size=24", "progress=false"]
    sliced = () if any(o.startswith("corpus=") for o in overrides) else SLICE
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="index_corpus", overrides=[*base, *sliced, *overrides])
    job: IndexJobConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    job.cluster = cluster  # the session's running Ray cluster
    return job


def _vectors(layout: IndexLayout, source: str) -> tuple[list[str], np.ndarray]:
    parts = [read_shard(p) for p in sorted((layout.root / "embeddings" / source).glob("shard-*.parquet"))]
    return [i for ids, _ in parts for i in ids], np.concatenate([v for _, v in parts])


def test_kill_and_resume_gives_the_same_index(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path: Path, data_root: Path
) -> None:
    fresh = run(_cfg(tmp_path / "fresh", data_root, cluster_cfg))
    assert fresh["complete"]
    totals = fresh["totals"]
    assert 100 <= totals["chunks"] <= 400 and totals["vectors"] == totals["chunks"]
    shards_total = fresh["timings"]["embed"]["shards_total"]
    assert shards_total >= 5

    # "Kill" after two shards: the job stops unfinished, with two shards on disk and no manifest.
    partial = run(_cfg(tmp_path / "resumed", data_root, cluster_cfg, "stop_after_shards=2"))
    resumed_layout = IndexLayout(tmp_path / "resumed")
    assert partial["complete"] is False and not resumed_layout.manifest.exists()
    assert len(list((tmp_path / "resumed" / "embeddings").rglob("shard-*.parquet"))) == 2
    # The same command again embeds only the missing shards.
    resumed = run(_cfg(tmp_path / "resumed", data_root, cluster_cfg))
    assert resumed["complete"] and resumed["timings"]["embed"]["shards_embedded"] == shards_total - 2
    assert resumed["totals"] == totals
    # The encoder precision is recorded with the first shard (a resume in another one is refused).
    assert fresh["embedder"]["precision"] == resumed["embedder"]["precision"] == "fp32"

    fresh_layout = IndexLayout(tmp_path / "fresh")
    for source in ("medquad", "pubmedqa", "bioasq"):
        ids_a, vec_a = _vectors(fresh_layout, source)
        ids_b, vec_b = _vectors(resumed_layout, source)
        assert ids_a == ids_b and np.array_equal(vec_a, vec_b), source

    encoder = Embedder(_cfg(tmp_path, data_root, cluster_cfg).embedder, load_documents=False).encode_queries
    a, b = Searcher(tmp_path / "fresh", encoder), Searcher(tmp_path / "resumed", encoder)
    for mode in ("dense", "bm25", "hybrid"):
        res = a.search(QUERIES, top_k=5, mode=mode)
        assert res == b.search(QUERIES, top_k=5, mode=mode), mode
        assert all(len(hits) >= 5 for hits in res.values())
    hit = a.lookup(next(iter(a.search({"q": QUERIES["q3"]}, top_k=1, sources=["bioasq"])["q"])))
    assert hit.source == "bioasq" and hit.parent_id == hit.doc_id  # plain chunks: the parent is the document
    assert str(a.lookup(hit.doc_id).parent_id).startswith("pubmed:")  # ...whose own parent is the article

    # Deleting shards of a finished index (a lost file) and rerunning re-embeds just those.
    for shard in sorted((tmp_path / "fresh" / "embeddings" / "medquad").glob("shard-*.parquet"))[:2]:
        shard.unlink()
    again = run(_cfg(tmp_path / "fresh", data_root, cluster_cfg))
    assert again["timings"]["embed"]["shards_embedded"] == 2 and again["totals"] == totals
    assert Searcher(tmp_path / "fresh", encoder).search(QUERIES, top_k=5) == b.search(QUERIES, top_k=5)
    assert len(json.loads(fresh_layout.manifest.read_text())["history"]) == 2


def test_malformed_records_are_set_aside_and_counted(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path: Path, data_root: Path
) -> None:
    records = tmp_path / "mine" / "records.jsonl"
    records.parent.mkdir()
    lines = [
        json.dumps(
            {
                "id": "ok1",
                "title": "Scurvy",
                "content": "Vitamin C deficiency causes scurvy with bleeding gums.",
            }
        ),
        "{broken json",
        json.dumps({"id": "", "content": "no id"}),
        json.dumps({"id": "empty", "content": " \t "}),
        json.dumps({"id": "typed", "content": ["not", "text"]}),
        json.dumps({"id": "pubmedqa:21645374", "content": "an id the pubmedqa source already holds"}),
        json.dumps(
            {"id": "ok2", "title": "Rickets", "content": "Vitamin D deficiency in children causes rickets."}
        ),
    ]
    records.write_text("\n".join(lines) + "\n")
    cfg = _cfg(tmp_path / "index", data_root, cluster_cfg, "corpus=pubmedqa")
    # A second source read through Ray Data's bulk JSONL path; its ids may collide with the first's.
    cfg.corpus.sources.append(SourceConfig("mine", "medrag_files", {"path": str(records.parent)}))
    out = run(cfg)
    mine = out["sources"]["mine"]
    assert (mine["documents"], mine["chunks"], mine["vectors"], mine["rejected"]) == (2, 2, 2, 5)
    assert mine["rejected_by_reason"] == {
        "invalid JSON (JSONDecodeError)": 1,
        "missing id": 1,
        "empty content": 1,
        "wrong type: content is list": 1,
        "duplicate id": 1,
    }
    rejected = [json.loads(x) for x in (tmp_path / "index" / "rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == 5 and all(r["source"] == "mine" and r["reason"] for r in rejected)
    assert out["sources"]["pubmedqa"]["documents"] == 30 and out["sources"]["pubmedqa"]["rejected"] == 0
    hits = Searcher(tmp_path / "index").search(
        {"q": "vitamin C deficiency bleeding gums"}, top_k=1, sources=["mine"]
    )
    assert list(hits["q"]) == ["ok1#0"]


def _hub_copy(root: Path, data_root: Path, n: int = 80, shards: int = 3) -> Path:
    """A local copy of a MedRAG hub repository (``chunk/*.jsonl``) holding real PubMedQA abstracts as
    MedRAG snippets, plus one malformed line; read by ``medrag_hub`` exactly as the hub's files are."""
    data = json.loads((data_root / "pubmedqa_pqal" / "ori_pqal.json").read_text(encoding="utf-8"))
    rows = [
        {
            "id": f"PMID{pmid}_0",
            "title": rec["QUESTION"],
            "content": " ".join(rec["CONTEXTS"]),
            "contents": f"{rec['QUESTION']}. {' '.join(rec['CONTEXTS'])}",
            "PMID": pmid,
        }  # fmt: skip
        for pmid, rec in list(data.items())[:n]
    ]
    (root / "chunk").mkdir(parents=True)
    per = -(-n // shards)
    for k in range(shards):
        lines = [json.dumps(r) for r in rows[k * per : (k + 1) * per]]
        if k == 1:
            lines.insert(3, '{"id": "cut off')
        (root / "chunk" / f"pubmed23n{k + 1:04d}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_an_interrupted_hub_corpus_index_resumes_to_the_same_index(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path: Path, data_root: Path
) -> None:
    """corpus=medrag_pubmed through Ray Data's streaming JSONL read (the bulk path); ``limit`` keeps the
    first 60 accepted snippets even though Ray Data reads ahead."""
    repo = _hub_copy(tmp_path / "MedRAG-pubmed", data_root)
    hub = ("corpus=medrag_pubmed", f"+corpus.sources.0.options.url={repo}", "limit=60", "shard_size=12")
    fresh = run(_cfg(tmp_path / "fresh", data_root, cluster_cfg, *hub))
    pubmed = fresh["sources"]["pubmed"]
    assert (pubmed["documents"], pubmed["rejected"]) == (60, 1) and pubmed["chunks"] >= 60
    assert pubmed["rejected_by_reason"] == {"invalid JSON (JSONDecodeError)": 1}
    shards_total = fresh["timings"]["embed"]["shards_total"]
    assert shards_total >= 5

    partial = run(_cfg(tmp_path / "resumed", data_root, cluster_cfg, *hub, "stop_after_shards=2"))
    assert partial["complete"] is False
    resumed = run(_cfg(tmp_path / "resumed", data_root, cluster_cfg, *hub))
    assert resumed["complete"] and resumed["timings"]["embed"]["shards_embedded"] == shards_total - 2
    assert resumed["totals"] == fresh["totals"]
    ids_a, vec_a = _vectors(IndexLayout(tmp_path / "fresh"), "pubmed")
    ids_b, vec_b = _vectors(IndexLayout(tmp_path / "resumed"), "pubmed")
    assert ids_a == ids_b and np.array_equal(vec_a, vec_b)
    assert ids_a[0] == "PMID21645374_0#0"  # the hub files' order, first file first
    a, b = Searcher(tmp_path / "fresh"), Searcher(tmp_path / "resumed")
    assert a.search(QUERIES, top_k=5, mode="bm25") == b.search(QUERIES, top_k=5, mode="bm25")
