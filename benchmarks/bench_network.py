"""Curveball NODF null samples: Ray tasks vs the same work serially in one process.

Run: ``python benchmarks/bench_network.py [--n 1000] [--rows 213] [--cols 100] [--cpus 2] [--repeats 3]``

Both runs compute exactly the same samples (asserted): ``n`` curveball samples (burn-in 10,000, thin 100) of
a random ``rows × cols`` matrix, split into one batch per CPU; each batch is an independent chain with its
own burn-in (``medagent.network.nulls.null_nodf_batch``). The serial baseline runs those batches one after
the other with the builtin ``map``; the Ray run submits one task per batch. The two alternate ``--repeats``
times and the medians are compared; the CPU seconds of each side are printed too (wall >> CPU means other
jobs took the cores). Ray start-up and worker warm-up are timed separately and excluded. ``--single-chain``
also times one chain of ``n`` samples (one burn-in), the cheapest serial plan. BLAS runs single-threaded and
at the same niceness on both sides (see below). Machines here are shared and noisy: read the ratio, not the
absolute times.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

# One BLAS thread everywhere, set before numpy loads: Ray gives each 1-CPU task OMP_NUM_THREADS=1, and a
# serial process left with OpenBLAS's default threads competes with itself on a shared 2-core machine, which
# would flatter the ratio. Both sides then measure the same single-threaded work.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# Ray starts its workers at niceness 15 (RayConfig worker_niceness); on a machine shared with other jobs they
# would then lose the CPU to everything else while the serial baseline runs at 0. Same priority for both.
os.environ.setdefault("RAY_worker_niceness", "0")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from medagent.config import ClusterConfig, RayInitConfig  # noqa: E402
from medagent.network.nestedness import nodf  # noqa: E402
from medagent.network.nulls import NullBatch, nodf_null, null_nodf_batch, plan_batches, summarise_null  # noqa: E402
from pipelines.common import ray_session  # noqa: E402


def timed_batch(batch: NullBatch) -> tuple[np.ndarray, float]:
    """One null batch and the CPU seconds its process spent on it (contention shows as wall >> CPU)."""
    c0 = time.process_time()
    samples = null_nodf_batch(batch)
    return samples, time.process_time() - c0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1000, help="null samples")
    p.add_argument("--rows", type=int, default=213)
    p.add_argument("--cols", type=int, default=100)
    p.add_argument("--density", type=float, default=0.15)
    p.add_argument("--cpus", type=int, default=2, help="Ray CPUs and number of batches")
    p.add_argument("--burnin", type=int, default=10_000)
    p.add_argument("--thin", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3, help="alternating serial / Ray runs; medians reported")
    p.add_argument("--single-chain", action="store_true", help="also time one serial chain of n samples")
    args = p.parse_args()

    B = np.random.default_rng(0).random((args.rows, args.cols)) < args.density
    batch = math.ceil(args.n / args.cpus)
    batches = plan_batches(
        B, "curveball", args.n, seed=1, batch_size=batch, burnin=args.burnin, thin=args.thin
    )
    print(
        f"{args.n} curveball NODF samples of a {args.rows}x{args.cols} matrix (fill {B.mean():.3f}), "
        f"{len(batches)} batches of <= {batch}, burn-in {args.burnin}, thin {args.thin}"
    )
    print(f"load average before the runs: {os.getloadavg()[0]:.2f} (other processes share these cores)")
    if args.single_chain:
        t0 = time.perf_counter()
        nodf_null(B, "curveball", args.n, 1, batch_size=args.n, burnin=args.burnin, thin=args.thin)
        print(f"serial, one chain of {args.n} (one burn-in): {time.perf_counter() - t0:.2f} s")

    t0 = time.perf_counter()
    runs: dict[str, list[tuple[float, float]]] = {"serial": [], "ray": []}
    with ray_session(ClusterConfig(ray=RayInitConfig(num_cpus=args.cpus, include_dashboard=False))):
        from actors.network_tasks import ray_map

        t_start = time.perf_counter() - t0
        # Warm-up (not measured): one batch per CPU, long enough (~0.5 s) that they run side by side, so
        # every worker process is started and has imported the library before the timed runs.
        warm = plan_batches(B, "curveball", args.cpus * 50, seed=0, batch_size=50, burnin=5_000, thin=1)
        ray_map(timed_batch, warm)
        # Serial and Ray runs alternate, so a burst of load from other jobs hits both sides alike.
        for _ in range(args.repeats):
            results = {}
            for side, mapper in (("serial", map), ("ray", ray_map)):
                t0 = time.perf_counter()
                out = list(mapper(timed_batch, batches))
                runs[side].append((time.perf_counter() - t0, sum(cpu for _, cpu in out)))
                results[side] = np.concatenate([x for x, _ in out])
            np.testing.assert_array_equal(results["serial"], results["ray"])
    summary = summarise_null(nodf(B).nodf, results["ray"], "curveball")
    wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
    for side, label in (
        ("serial", "serial (same batches, one process)"),
        ("ray", f"Ray tasks ({args.cpus} CPUs)"),
    ):
        walls = ", ".join(f"{w:.2f}" for w, _ in runs[side])
        cpu = statistics.median(c for _, c in runs[side])
        print(f"{label:36s} wall median {wall[side]:6.2f} s  [{walls}]  CPU {cpu:.2f} s")
    print(f"(Ray start + warm-up {t_start:.1f} s excluded; identical samples in every run)")
    print(
        f"speed-up serial / Ray (wall medians): {wall['serial'] / wall['ray']:.2f}x   (target >= 1.7x on 2 cores)"
    )
    print(
        f"null mean {summary.mean:.3f}, sd {summary.sd:.3f}, observed NODF {summary.obs:.3f}, z {summary.z:.2f}"
    )


if __name__ == "__main__":
    main()
