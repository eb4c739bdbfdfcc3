"""Ray Data callable class that embeds whole shards (``map_batches(EmbedWorker, compute=ActorPoolStrategy)``).

The unit of work is a shard: each input row names one chunk block (``source``, ``shard``, ``path``); the
actor reads that block and returns one output row per chunk. A shard is therefore always encoded by one
call, with the same padding groups, and a resumed job reproduces its vectors exactly. (Rows of chunks fed
through ``read_parquet`` would not do: Ray Data's parquet reader merges small files into one block, so
shards would straddle batches and the driver would see nothing until the end.)

The model loads once per actor in ``__init__``; ``__call__`` only reads and encodes. Resources (fractional
CPUs here, one GPU per actor on a cluster) are set in ``actors.builder.embed_worker_map_kwargs``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from medagent.config import to_dataclass
from medagent.retrieval.config import EmbedderConfig
from medagent.retrieval.corpus import require_columns
from medagent.retrieval.embedders import Embedder

REQUIRED_INPUT_KEYS = ("source", "shard", "path")
BLOCK_COLUMNS = ["id", "title", "content", "ordinal"]


class EmbedWorker:
    """``map_batches`` UDF: shard rows ``source, shard, path`` -> chunk rows ``id, source, shard, ordinal,
    embedding`` (float32 ``(n, dim)``), ``precision`` (the encoder's: ``fp16`` on a GPU, else ``fp32``).

    Args:
        embedder: ``EmbedderConfig`` as a dict.
        threads: Torch intra-op threads. Ray sets ``OMP_NUM_THREADS`` from the actor's (fractional) CPU
            share, which would leave a CPU actor a single thread.
    """

    def __init__(self, embedder: dict[str, Any], threads: int | None = None) -> None:
        cfg: EmbedderConfig = to_dataclass(EmbedderConfig, embedder)
        if threads:
            import torch

            torch.set_num_threads(threads)
        self.embedder = Embedder(cfg)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import pyarrow.parquet as pq

        require_columns(batch, REQUIRED_INPUT_KEYS, "EmbedWorker")
        out: dict[str, list[Any]] = {"id": [], "source": [], "shard": [], "ordinal": [], "embedding": []}
        for source, shard, path in zip(batch["source"], batch["shard"], batch["path"], strict=True):
            block = pq.read_table(str(path), columns=BLOCK_COLUMNS).to_pydict()
            n = len(block["id"])
            out["embedding"].append(self.embedder.encode_documents(block["title"], block["content"]))
            out["id"].extend(block["id"])
            out["ordinal"].extend(block["ordinal"])
            out["source"].extend([str(source)] * n)
            out["shard"].extend([int(shard)] * n)
        vectors = (
            np.concatenate(out.pop("embedding"))
            if out["embedding"]
            else np.zeros((0, self.embedder.dimension), np.float32)
        )
        precision = np.asarray([self.embedder.precision] * len(vectors))
        return {**{k: np.asarray(v) for k, v in out.items()}, "embedding": vectors, "precision": precision}
