"""Retrieval quality on BioASQ: dense, BM25 and hybrid (RRF), each with and without the reranker.

Run: ``python benchmarks/bench_retrieval_quality.py [--index-dir DIR] [--questions 300]``.

BioASQ questions come with gold snippets: sentences of PubMed abstracts that answer them. The BioASQ source
of an index holds every gold snippet as its own document (``bioasq_snippets`` reader, id
``bioasq:<pmid>:<sha1 of the text>``), so for each question the relevant documents are known exactly. The
rest of the index (the other snippets, PubMedQA abstracts, MedQuAD answers in ``cpu_default``) are the
distractors.

Index: ``outputs/index/cpu_default`` when ``make index`` built it; else ``outputs/index/bioasq_eval``
(``corpus=bioasq_eval``: the BioASQ snippets + PubMedQA, MiniLM, flat + BM25), built here on first use.

Protocol, as the agent retrieves: ``top_k`` (32) per source from every source, merged by score; a
chunk counts for its document (the first chunk of a document ranks it). "+ rerank": the merged top
``--rerank-depth`` (16: what ``scale=cpu`` hands the reranker, TopK 8 from each of two sources) are
re-scored by the configured reranker (mpnet on CPU) and re-sorted; below that depth the order is the
retriever's, so recall@32 is the same with and without the reranker at depth <= 32. Metrics per
question: recall@8, recall@32 (share of the gold snippets in the top k) and nDCG@10 (binary gains);
means with 95% bootstrap CIs over questions, and paired differences against dense on the *same*
questions (bootstrap CI of the per-question difference).

Leak: the questions are BioASQ *factoid / list / summary* questions only. The yes/no questions are the
agent's ``benchmark=bioasq`` (MIRAGE's 618), whose gold snippets ``cpu_default`` also indexes
(docs/ARCHITECTURE.md: evaluate that benchmark with ``corpus=medquad``); none of them is used here, so
choosing a retriever on these figures does not tune it on the agent's test questions.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import random
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from medagent.config import RerankerConfig  # noqa: E402
from medagent.eval.stats import bootstrap_ci  # noqa: E402
from medagent.retrieval.rerank import load_text_encoder  # noqa: E402
from medagent.retrieval.search import MODES, Searcher  # noqa: E402

_PMID = re.compile(r"(\d+)\s*$")
KS = (8, 32)


def snippet_id(document: str, text: str) -> str:
    """The ``bioasq_snippets`` reader's document id of a snippet (medagent/retrieval/readers.py); the
    benchmark checks that every gold id it computes is in the index, so a drift fails loudly."""
    m = _PMID.search(document)
    pmid = m.group(1) if m else document
    norm = " ".join(text.split())
    return f"bioasq:{pmid}:{hashlib.sha1(norm.encode('utf-8')).hexdigest()[:12]}"


def load_questions(data_root: Path, n: int, seed: int) -> list[dict[str, Any]]:
    """A seeded sample of non-yes/no BioASQ questions that have gold snippets (see the module docstring)."""
    seen: set[str] = set()
    pool: list[dict[str, Any]] = []
    for f in sorted((data_root / "mirage_rawdata" / "bioasq").glob("Task*BGoldenEnriched/*_golden.json.gz")):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for q in json.load(fh).get("questions", []):
                if q.get("type") == "yesno" or q["id"] in seen or not q.get("snippets"):
                    continue
                seen.add(q["id"])
                gold = {
                    snippet_id(s["document"], s["text"])
                    for s in q["snippets"]
                    if isinstance(s.get("text"), str)
                }
                pool.append({"id": q["id"], "type": q["type"], "query": q["body"], "gold": gold})
    pool.sort(key=lambda q: q["id"])
    return random.Random(seed).sample(pool, min(n, len(pool)))


def ndcg(ranked: Sequence[str], gold: set[str], k: int = 10) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(gold))))
    return dcg / ideal if ideal else 0.0


def metrics(ranked: Sequence[str], gold: set[str]) -> dict[str, float]:
    out = {f"recall@{k}": len(gold & set(ranked[:k])) / len(gold) for k in KS}
    out["ndcg@10"] = ndcg(ranked, gold)
    return out


def ensure_index(index_dir: Path | None) -> Path:
    if index_dir is not None:
        return index_dir
    full = REPO / "outputs/index/cpu_default"
    if (full / "manifest.json").exists():
        return full
    own = REPO / "outputs/index/bioasq_eval"
    if not (own / "manifest.json").exists():
        from hydra import compose, initialize_config_dir
        from omegaconf import OmegaConf

        from pipelines.index_corpus import register_index_configs, run

        register_index_configs()
        with initialize_config_dir(str(REPO / "conf"), version_base="1.3"):
            cfg = compose("index_corpus", [f"out_dir={own}", "corpus=bioasq_eval", "progress=false"])
        run(OmegaConf.to_object(cfg))  # type: ignore[arg-type]
    return own


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--index-dir", type=Path, default=None)
    parser.add_argument(
        "--data-root", type=Path, default=Path(os.environ.get("MEDAGENT_DATA", REPO.parent / "shared/data"))
    )
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--top-k", type=int, default=32, help="candidates per source (the QA paper: 32)")
    parser.add_argument(
        "--rerank-depth", type=int, default=16, help="merged candidates the reranker re-scores (0: none)"
    )
    parser.add_argument("--reranker", default="mpnet-cpu", help="conf/reranker/<name>.yaml")
    parser.add_argument("--bootstrap", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write every per-question figure here")
    args = parser.parse_args()

    index_dir = ensure_index(args.index_dir).resolve()
    questions = load_questions(args.data_root, args.questions, args.seed)
    searcher = Searcher(index_dir)
    gold_ids = sorted({g for q in questions for g in q["gold"]})
    absent = [g for g in gold_ids if not searcher.store("bioasq").find([g + "#0"]).tolist()[0] >= 0]
    if absent:
        raise SystemExit(
            f"{len(absent)} of {len(gold_ids)} gold snippet ids are not in {index_dir}: {absent[:3]}"
        )

    # First stage: every mode, all questions in one call per mode (the encoder batches the queries).
    t0 = time.perf_counter()
    queries = {q["id"]: q["query"] for q in questions}
    first: dict[str, dict[str, list[str]]] = {}
    timing: dict[str, float] = {}
    for mode in MODES:
        t = time.perf_counter()
        res = searcher.search(queries, top_k=args.top_k, mode=mode)
        timing[mode] = (time.perf_counter() - t) / len(questions)
        first[mode] = {qid: list(ranked) for qid, ranked in res.items()}

    # Reranking: candidates are chunks; a bi-encoder scores each one independently, so the vectors of a
    # chunk are computed once for all modes and questions that retrieve it.
    import yaml

    from medagent.config import to_dataclass

    rerank = args.rerank_depth > 0
    rcfg = to_dataclass(
        RerankerConfig, yaml.safe_load((REPO / f"conf/reranker/{args.reranker}.yaml").read_text())
    )
    encode = load_text_encoder(rcfg) if rerank else None
    need = sorted({c for m in MODES for r in first[m].values() for c in r[: args.rerank_depth]})
    docs = dict(zip(need, searcher.documents(need), strict=True))
    t = time.perf_counter()
    texts = [f"{d.title}\n{d.content}" if d.title else d.content for d in docs.values()]
    dvec = dict(zip(need, encode(texts, False), strict=True)) if encode and need else {}
    qvec = dict(zip(queries, encode(list(queries.values()), True), strict=True)) if encode else {}
    rerank_s = time.perf_counter() - t

    def to_docs(chunks: Sequence[str]) -> list[str]:
        out: list[str] = []
        for c in chunks:
            d = c.rsplit("#", 1)[0]
            if d not in out:
                out.append(d)
        return out

    per: dict[str, list[dict[str, float]]] = {}
    for mode in MODES:
        for rr in (False, True) if rerank else (False,):
            name = f"{mode}{' + rerank' if rr else ''}"
            rows = []
            for q in questions:
                ranked = first[mode][q["id"]]
                if rr:
                    head = ranked[: args.rerank_depth]
                    scores = np.array([float(dvec[c] @ qvec[q["id"]]) for c in head])
                    ranked = [head[i] for i in np.argsort(-scores, kind="stable")] + ranked[
                        args.rerank_depth :
                    ]
                rows.append(metrics(to_docs(ranked), q["gold"]))
            per[name] = rows

    n = len(questions)
    cols = [f"recall@{k}" for k in KS] + ["ndcg@10"]
    types = {t: sum(q["type"] == t for q in questions) for t in ("factoid", "list", "summary")}
    print(f"\nindex {index_dir} ({', '.join(searcher.sources)}); {n} BioASQ questions {types}, "
          f"{sum(len(q['gold']) for q in questions) / n:.1f} gold snippets each; top_k {args.top_k}/source; "
          f"rerank {args.reranker} over the merged top {args.rerank_depth}")  # fmt: skip
    print("first stage s/question: " + ", ".join(f"{m} {timing[m]:.3f}" for m in MODES)
          + f"; reranker {len(need)} chunks + {n} queries in {rerank_s:.0f} s; total {time.perf_counter() - t0:.0f} s")  # fmt: skip
    print(f"\n{'retriever':<18}" + "".join(f"{c + ' [95% CI]':>26}" for c in cols))
    for name, rows in per.items():
        cells = []
        for c in cols:
            v = [r[c] for r in rows]
            lo, hi = bootstrap_ci(v, args.bootstrap, args.seed)
            cells.append(f"{sum(v) / n:.3f} [{lo:.3f}, {hi:.3f}]")
        print(f"{name:<18}" + "".join(f"{x:>26}" for x in cells))
    base = per["dense"]
    print(f"\npaired vs dense, same {n} questions: mean difference [95% CI] (ratio of means)")
    for name, rows in per.items():
        if name == "dense":
            continue
        cells = []
        for c in cols:
            d = [r[c] - b[c] for r, b in zip(rows, base, strict=True)]
            lo, hi = bootstrap_ci(d, args.bootstrap, args.seed)
            ratio = sum(r[c] for r in rows) / max(1e-12, sum(b[c] for b in base))
            cells.append(f"{sum(d) / n:+.3f} [{lo:+.3f}, {hi:+.3f}] {ratio:.2f}x")
        print(f"{name:<18}" + "".join(f"{x:>30}" for x in cells))
    best = max(per, key=lambda k: sum(r["ndcg@10"] for r in per[k]))
    print(f"\nbest by nDCG@10: {best}")
    if args.json:
        args.json.write_text(json.dumps({"questions": [q["id"] for q in questions], "per_question": per}))


if __name__ == "__main__":
    main()
