"""Agreement of two annotators on the same interviews (Cohen's kappa): the network's lexicon annotator against a
second one, the LLM annotator on a sample of interviews, or the MediTOD gold on the 3 public dialogues (an
in-sample figure: the lexicon's lay synonyms were checked against those dialogues, ``annotate.vocab``).

Two units, each a nominal label per item, over the interviews both annotators have:

* **question category**: every physician turn either annotator calls a question; its label is the inquiry
  category, or ``not a question`` for the annotator that did not call it one;
* **finding polarity**: every (interview, canonical symptom) either annotator mentions; the label is
  ``positive``, ``negative`` or ``absent``. Symptoms neither mentions are not items (they would inflate
  the agreement with easy "absent" pairs).

``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_e`` from the two annotators' marginals; 1 when both give one
and the same label to everything (p_e = 1), as no disagreement is possible then.

    python -m medagent.network.agreement FIRST.jsonl SECOND.jsonl    # two annotations.jsonl files
    python -m medagent.network.agreement --gold [--data-root DIR]     # lexicon vs the 3 gold dialogues
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from medagent.interview.types import Annotation
from medagent.run.rundir import jsonl_lines

NOT_A_QUESTION = "not a question"
ABSENT = "absent"


@dataclass(frozen=True)
class Agreement:
    unit: str
    n_interviews: int
    n_items: int
    observed: float
    expected: float
    kappa: float


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[float, float, float]:
    """``(kappa, p_o, p_e)`` of two label sequences over the same items."""
    if len(a) != len(b):
        raise ValueError(f"the annotators label different numbers of items ({len(a)} vs {len(b)})")
    if not a:
        return float("nan"), float("nan"), float("nan")
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb[k] for k in ca.keys() | cb.keys()) / (n * n)
    kappa = 1.0 if p_e == 1 else (p_o - p_e) / (1 - p_e)
    return kappa, p_o, p_e


def _shared(first: Mapping[str, Annotation], second: Mapping[str, Annotation]) -> list[str]:
    return sorted(first.keys() & second.keys())


def question_items(first: Annotation, second: Annotation) -> tuple[list[str], list[str]]:
    a = {q.turn: q.category for q in first.questions}
    b = {q.turn: q.category for q in second.questions}
    turns = sorted(a.keys() | b.keys())
    return [a.get(t, NOT_A_QUESTION) for t in turns], [b.get(t, NOT_A_QUESTION) for t in turns]


def finding_items(first: Annotation, second: Annotation) -> tuple[list[str], list[str]]:
    def labels(x: Annotation) -> dict[str, str]:
        return {f: "negative" for f in x.negative_findings} | {f: "positive" for f in x.positive_findings}

    a, b = labels(first), labels(second)
    names = sorted(a.keys() | b.keys())
    return [a.get(f, ABSENT) for f in names], [b.get(f, ABSENT) for f in names]


def agreement(first: Mapping[str, Annotation], second: Mapping[str, Annotation]) -> list[Agreement]:
    """Kappa per unit (module docstring) over the interviews both annotated."""
    ids = _shared(first, second)
    out = []
    for unit, items in (("question category", question_items), ("finding polarity", finding_items)):
        a: list[str] = []
        b: list[str] = []
        for i in ids:
            x, y = items(first[i], second[i])
            a += x
            b += y
        kappa, p_o, p_e = cohen_kappa(a, b)
        out.append(Agreement(unit, len(ids), len(a), p_o, p_e, kappa))
    return out


def read_annotations(path: str | Path) -> dict[str, Annotation]:
    """An ``annotations.jsonl`` (the latest line of each interview wins, as in a resumed run dir)."""
    out: dict[str, Annotation] = {}
    for line in jsonl_lines(Path(path).read_text(encoding="utf-8")):
        if line.strip():
            d = json.loads(line)
            if not d.get("error"):
                out[str(d["interview_id"])] = Annotation.from_dict(d)
    return out


def lexicon_vs_gold(data_root: str | None) -> tuple[dict[str, Annotation], dict[str, Annotation]]:
    from medagent.interview.annotate.lexicon import LexiconAnnotator
    from medagent.interview.meditod import load_meditod, load_ontology

    pairs = load_meditod(data_root)
    lexicon = LexiconAnnotator.from_ontology(load_ontology(data_root))
    return {iv.id: lexicon.annotate(iv) for iv, _ in pairs}, {iv.id: g for iv, g in pairs}


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m medagent.network.agreement", description=__doc__)
    p.add_argument("first", nargs="?", help="annotations.jsonl of the first annotator (e.g. lexicon)")
    p.add_argument("second", nargs="?", help="annotations.jsonl of the second annotator (e.g. llm)")
    p.add_argument("--gold", action="store_true", help="the lexicon annotator vs the MediTOD gold dialogues")
    p.add_argument("--data-root", default=None)
    args = p.parse_args(argv)
    if args.gold:
        first, second = lexicon_vs_gold(args.data_root)
    elif args.first and args.second:
        first, second = read_annotations(args.first), read_annotations(args.second)
    else:
        p.error("give two annotations.jsonl files, or --gold")
    print(json.dumps([asdict(a) for a in agreement(first, second)], indent=2))


if __name__ == "__main__":
    main()
