"""GPU check: encoder and reranker throughput at the production model shapes, with random weights.

For a lent GPU machine that has torch and transformers but no vLLM and no model hub: the models are
built from their configs with random weights (the shapes, not the values, decide the speed), so nothing
is downloaded. Prints one table row per (model, precision, sequence length).

  * SPECTER (the paper's retriever) is a BERT-base encoder (12 layers, 768 wide, scivocab 31,090 tokens):
    documents at 256 tokens (index build) and queries at 64 tokens (search time), fp16/bf16 and fp32.
  * gte-Qwen2-7B-instruct (the paper's reranker) is a Qwen2 decoder (28 layers, 3,584 wide, GQA 28/4 heads,
    18,944 MLP) used as an embedder with last-token pooling; in 4-bit NF4 (bitsandbytes, as the paper) and
    bf16. One seed-A query reranks TopK 32 x 6 sources = 192 candidates: ``ms/query`` is that.

Run: ``python benchmarks/gpu_check.py [--quick]``. Needs CUDA; bitsandbytes is optional (the 4-bit row is
skipped with a note when it is missing).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

CANDIDATES_PER_QUERY = 192  # TopK=32 per source x 6 sources (the QA paper)


@dataclass
class Row:
    model: str
    precision: str
    seq_len: int
    batch: int
    items_per_s: float
    ms_per_query: float | None
    peak_gib: float


def _time(fn: Callable[[], object], warmup: int = 2, iters: int = 5) -> float:
    """Median seconds per call, timed with CUDA events after warm-up."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return sorted(times)[len(times) // 2]


def bench_encoder(dtype: torch.dtype, seq_len: int, batch: int) -> Row:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        vocab_size=31090,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=512,
    )
    torch.cuda.reset_peak_memory_stats()
    model = BertModel(cfg).to("cuda", dtype=dtype).eval()
    ids = torch.randint(0, cfg.vocab_size, (batch, seq_len), device="cuda")
    mask = torch.ones_like(ids)

    @torch.inference_mode()
    def step() -> object:
        out = model(input_ids=ids, attention_mask=mask).last_hidden_state
        return out[:, 0]  # SPECTER embeds with the [CLS] token

    s = _time(step)
    row = Row(
        "SPECTER shape (BERT-base)",
        str(dtype).removeprefix("torch."),
        seq_len,
        batch,
        batch / s,
        None,
        torch.cuda.max_memory_allocated() / 2**30,
    )
    return row


def _qwen2_7b(dtype: torch.dtype) -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2Model

    cfg = Qwen2Config(
        vocab_size=151646,
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        max_position_embeddings=32768,
    )
    with torch.device("cuda"):
        model = Qwen2Model(cfg).to(dtype)
    return model.eval()


def _to_nf4(model: torch.nn.Module) -> torch.nn.Module:
    """Swaps every Linear of the decoder for a bitsandbytes NF4 Linear (as load_in_4bit does)."""
    import bitsandbytes as bnb

    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear):
                q = bnb.nn.Linear4bit(
                    child.in_features,
                    child.out_features,
                    bias=child.bias is not None,
                    compute_dtype=torch.bfloat16,
                    quant_type="nf4",
                )
                # Params4bit quantizes when it moves from host to device.
                q.weight = bnb.nn.Params4bit(
                    child.weight.data.to("cpu"), requires_grad=False, quant_type="nf4"
                )
                if child.bias is not None:
                    q.bias = torch.nn.Parameter(child.bias.data, requires_grad=False)
                setattr(module, child_name, q.to("cuda"))
    torch.cuda.empty_cache()
    return model


def bench_reranker(precision: str, seq_len: int, batch: int) -> Row:
    torch.cuda.reset_peak_memory_stats()
    model = _qwen2_7b(torch.bfloat16)
    if precision == "nf4":
        model = _to_nf4(model)
    torch.cuda.reset_peak_memory_stats()
    ids = torch.randint(0, 151646, (batch, seq_len), device="cuda")
    mask = torch.ones_like(ids)

    @torch.inference_mode()
    def step() -> object:
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        emb = torch.nn.functional.normalize(hidden[:, -1].float(), dim=-1)  # last-token pooling (gte-Qwen2)
        return emb

    s = _time(step, warmup=1, iters=3)
    per_item = s / batch
    row = Row(
        "gte-Qwen2-7B shape",
        precision,
        seq_len,
        batch,
        1 / per_item,
        per_item * (CANDIDATES_PER_QUERY + 1) * 1000,
        torch.cuda.max_memory_allocated() / 2**30,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer configurations (about a minute)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_check needs a CUDA GPU")
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    rows: list[Row] = []
    t0 = time.perf_counter()
    for dtype in (torch.float16, torch.float32):
        for seq_len, batch in ((256, 512), (64, 1024)):
            rows.append(bench_encoder(dtype, seq_len, batch))
            torch.cuda.empty_cache()  # the model died with the benchmark function
            if args.quick:
                break
    try:
        import bitsandbytes  # noqa: F401

        precisions = ["nf4", "bf16"]
    except ImportError:
        print("bitsandbytes not installed: skipping the 4-bit reranker row")
        precisions = ["bf16"]
    for precision in precisions:
        rows.append(bench_reranker(precision, 256, 64))
        torch.cuda.empty_cache()
    print(
        f"\n{'model':<28} {'precision':<9} {'seq':>4} {'batch':>5} {'items/s':>10} {'ms/query':>9} {'peak GiB':>8}"
    )
    for r in rows:
        mq = f"{r.ms_per_query:9.1f}" if r.ms_per_query is not None else f"{'':>9}"
        print(
            f"{r.model:<28} {r.precision:<9} {r.seq_len:>4} {r.batch:>5} {r.items_per_s:>10.0f} {mq} {r.peak_gib:>8.1f}"
        )
    print(
        f"\nms/query = time to embed the query + {CANDIDATES_PER_QUERY} candidates (the QA paper: TopK 32 x 6 sources)"
    )
    print(f"total {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
