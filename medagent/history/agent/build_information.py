"""``python -m medagent.history.agent.build_information [--data-root D] [--out F]``: (re)build the information table.

Splits the Fareez RES transcripts (``split_ids``), annotates the training side with the lexicon annotator
and writes ``InformationTable`` JSON (default: the packaged ``conf/interview/information_res.json`` that
``agent.questioning.information_file: null`` reads). A separate module from ``information`` so that ``python -m``
does not run a module the package has already imported. About 3 s on the 159 training transcripts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from medagent.history.agent.information import (
    DEFAULT_EVAL_FRACTION,
    DEFAULT_SALT,
    PACKAGED_TABLE,
    build_table,
    split_ids,
    table_path,
)


def main(argv: Sequence[str] | None = None) -> int:
    from medagent.interview.annotate.lexicon import LexiconAnnotator
    from medagent.interview.meditod import load_ontology
    from medagent.interview.transcripts import load_transcripts

    parser = argparse.ArgumentParser(
        prog="python -m medagent.history.agent.build_information", description=__doc__
    )
    parser.add_argument(
        "--data-root", default=None, help="data root (default: MEDAGENT_DATA or ../shared/data)"
    )
    parser.add_argument(
        "--out", default=None, help=f"output JSON (default: the packaged conf/{PACKAGED_TABLE})"
    )
    parser.add_argument("--prefix", default="RES", help="Fareez transcript id prefix")
    parser.add_argument("--eval-fraction", type=float, default=DEFAULT_EVAL_FRACTION)
    parser.add_argument("--salt", default=DEFAULT_SALT)
    args = parser.parse_args(argv)
    interviews, _files = load_transcripts(args.prefix, args.data_root)
    train, ev = split_ids([iv.id for iv in interviews], args.eval_fraction, args.salt)
    annotator = LexiconAnnotator.from_ontology(load_ontology(args.data_root))
    table = build_table(
        interviews,
        annotator,
        train,
        ev,
        salt=args.salt,
        eval_fraction=args.eval_fraction,
        source=f"fareez {args.prefix} transcripts, lexicon annotator, {len(train)} train / {len(ev)} eval",
    )
    out = table_path(args.out)
    out.write_text(table.to_json(), encoding="utf-8")
    print(
        f"{out}: {table.n_interviews} training interviews, {len(table.findings)} findings x "
        f"{len(table.diagnoses)} diagnoses; physician order {table.physician_order}; "
        f"{len(table.eval_ids)} eval ids (conf/interviews/osce_res_eval.yaml must list them)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
