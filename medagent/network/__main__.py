"""Command line: check any matrix or sequence without writing code; every command prints JSON.

python -m medagent.network nodf MATRIX.csv [--no-sort]
python -m medagent.network modularity MATRIX.csv [--weighted] [--restarts N] [--seed S] [--partition FILE.csv]
python -m medagent.network markov SEQUENCE.csv --max-order 3
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from medagent.network.inputs import read_matrix_csv, read_partition_csv, read_sequences_csv
from medagent.network.markov import prepare, select_order
from medagent.network.modularity import barber_q, count_modules, maximise_barber_q
from medagent.network.nestedness import nodf


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def cmd_nodf(args: argparse.Namespace) -> dict[str, Any]:
    r = nodf(read_matrix_csv(args.matrix).values, sort=not args.no_sort)
    return {
        "nodf": _finite(r.nodf),
        "n_row": _finite(r.n_row),
        "n_col": _finite(r.n_col),
        "sorted": not args.no_sort,
    }


def cmd_modularity(args: argparse.Namespace) -> dict[str, Any]:
    m = read_matrix_csv(args.matrix)
    W = m.values if args.weighted else (m.values != 0).astype(float)
    if args.partition:
        rl, cl = read_partition_csv(args.partition, m)
        return {"Q": barber_q(W, rl, cl), "modules": count_modules(W, rl, cl), "weighted": args.weighted}
    p = maximise_barber_q(W, weighted=args.weighted, restarts=args.restarts, seed=args.seed)
    return {
        "Q": p.Q,
        "modules": p.modules,
        "weighted": args.weighted,
        "restarts": p.restarts,
        "hits": p.hits,
        "partition": {
            "rows": dict(zip(m.rows, p.row_labels, strict=True)),
            "cols": dict(zip(m.cols, p.col_labels, strict=True)),
        },
    }


def cmd_markov(args: argparse.Namespace) -> dict[str, Any]:
    seqs = prepare(read_sequences_csv(args.sequence), args.self_loops)
    sel = select_order(seqs, args.max_order, n_states=args.n_states, start=args.start)
    return {
        "n": sel.n,
        "start": sel.start,
        "n_states": sel.n_states,
        "self_loops": args.self_loops,
        "orders": [
            {
                "order": f.order,
                "loglik": f.loglik,
                "npar_full": f.npar_full,
                "npar_observed": f.npar_observed,
                "aic": f.aic_full,
                "bic": f.bic_full,
                "aic_observed": f.aic_observed,
                "bic_observed": f.bic_observed,
            }
            for f in sel.fits
        ],
        "selected": {
            "aic": sel.selected["aic_full"],
            "bic": sel.selected["bic_full"],
            "aic_observed": sel.selected["aic_observed"],
            "bic_observed": sel.selected["bic_observed"],
        },
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m medagent.network",
        description="Network metrics of the history-taking paper on any CSV. Matrices: first column = row labels, header = "
        "column labels, non-zero cells = links. Output: JSON on stdout.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    n = sub.add_parser("nodf", help="NODF nestedness on 0-100 (vegan nestednodf)")
    n.add_argument("matrix", help="matrix CSV")
    n.add_argument(
        "--no-sort",
        action="store_true",
        help="use the matrix as presented (vegan order=FALSE); "
        "default sorts rows and columns by decreasing fill (order=TRUE)",
    )
    n.set_defaults(func=cmd_nodf)
    m = sub.add_parser(
        "modularity", help="Barber bipartite modularity: best partition found, or of --partition"
    )
    m.add_argument("matrix", help="matrix CSV")
    m.add_argument("--weighted", action="store_true", help="use cell values as weights (default: binary)")
    m.add_argument(
        "--restarts", type=int, default=50, help="seeded Leiden restarts; the best Q is kept (default 50)"
    )
    m.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    m.add_argument(
        "--partition",
        metavar="FILE.csv",
        help="CSV node,level,module (level row|col): print the Q of this partition instead of optimising",
    )
    m.set_defaults(func=cmd_modularity)
    k = sub.add_parser("markov", help="Markov order selection: logL, parameters, AIC, BIC per order")
    k.add_argument("sequence", help="CSV with a 'state' column (one sequence) or 'sequence_id,state' columns")
    k.add_argument("--max-order", type=int, default=3, help="largest order (default 3)")
    k.add_argument(
        "--start",
        type=int,
        default=None,
        help="first target position, 0-based (default: max-order; all orders are scored on the same targets)",
    )
    k.add_argument("--n-states", type=int, default=None, help="S for npar_full (default: states observed)")
    k.add_argument(
        "--self-loops", choices=("keep", "collapse"), default="keep", help="keep repeats or merge runs"
    )
    k.set_defaults(func=cmd_markov)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        out = args.func(args)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=2, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
