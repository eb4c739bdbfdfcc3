"""Information values for ``policy=information``: a table built from training interviews, read by the policy.

**Split.** RES interviews are split once into ``train`` (the table is built from them) and ``eval`` (the
interviews a comparison evaluates) by a salted hash of the id (``split_ids``): an id's side never depends on
which other transcripts exist, and the table records both id lists, so a run can refuse to evaluate a
training interview (``check_disjoint``) and the manifest checksums the table it used.

**Findings** (rows of the finding × diagnosis table, counted once per training interview, positives only):

* the lexicon annotator's positive symptom findings (``Annotation.positive_findings``: answers to
  symptom-category questions), and
* one indicator per other category, ``category:<c>``: some answer to a category-``c`` question was positive
  (``answer_polarity``), e.g. ``category:exposure`` for a sick contact. Without them every non-symptom
  category would carry no information at all.

Diagnoses are the lexicon annotator's (the physician's stated differential). ``iv`` is the network
analysis' ``kl_information`` of each row (joint prior), recorded for reports; the policy recomputes the
values for the current differential (``medagent.history.agent.value``).

**Physician order.** Categories ranked by the mean relative position of the training physicians' questions
(``medagent.interview.order.mean_positions``, ``which="all"``); never-asked categories go last.

The table is built by ``python -m medagent.history.agent.build_information`` and is small JSON.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from medagent.history.agent.modes import history_mode
from medagent.interview.annotate.lexicon import LexiconAnnotator, answer_polarity
from medagent.interview.annotate.matcher import Lexicon
from medagent.interview.information import kl_information
from medagent.interview.order import mean_positions
from medagent.interview.transcripts import Interview
from medagent.interview.types import INQUIRY_CATEGORIES, Annotation

TABLE_VERSION = 1
DEFAULT_SALT = "medagent-res-split-v1"
DEFAULT_EVAL_FRACTION = 0.25
PACKAGED_TABLE = "interview/information_res.json"
CATEGORY_PREFIX = "category:"


def split_ids(ids: Iterable[str], eval_fraction: float, salt: str) -> tuple[list[str], list[str]]:
    """``(train, eval)``: an id is eval when ``sha256(salt/id)`` as a fraction of 2**64 is below ``eval_fraction``."""
    if not 0 < eval_fraction < 1:
        raise ValueError(f"eval_fraction must be in (0, 1), got {eval_fraction}")
    train: list[str] = []
    ev: list[str] = []
    for i in sorted(set(ids)):
        h = int.from_bytes(hashlib.sha256(f"{salt}/{i}".encode()).digest()[:8], "big") / 2**64
        (ev if h < eval_fraction else train).append(i)
    return train, ev


@dataclass(frozen=True)
class InformationTable:
    """Training statistics the information policy reads (module docstring).

    Attributes:
        findings: Row names (symptom findings, then ``category:<c>`` indicators).
        diagnoses: Column names.
        n_fd: Interviews with the finding and the diagnosis (rows x columns).
        n_d: Training interviews stating each diagnosis.
        n_interviews: Training interviews.
        iv: ``kl_information(n_fd)`` per finding (nats, joint prior; NaN without co-occurrence).
        physician_order: Categories by the physicians' mean question position (earliest first).
        positions: Mean relative position per category (NaN: never asked).
        train_ids / eval_ids: The split.
        salt / eval_fraction: How the split was drawn.
        symptom_terms / disease_terms: ``(surface, canonicals)`` of the lexicons, restricted to the table's
            names (plus block terms), so the agent matches text without the ontology files.
        source: What was read.
    """

    findings: list[str]
    diagnoses: list[str]
    n_fd: list[list[int]]
    n_d: list[int]
    n_interviews: int
    iv: list[float]
    physician_order: list[str]
    positions: dict[str, float]
    train_ids: list[str]
    eval_ids: list[str]
    salt: str
    eval_fraction: float
    symptom_terms: list[tuple[str, list[str]]] = field(default_factory=list)
    disease_terms: list[tuple[str, list[str]]] = field(default_factory=list)
    source: str = ""
    version: int = TABLE_VERSION

    def to_json(self) -> str:
        d = asdict(self)
        d["iv"] = [None if not math.isfinite(x) else round(x, 6) for x in self.iv]
        d["positions"] = {
            k: (None if not math.isfinite(v) else round(v, 6)) for k, v in self.positions.items()
        }
        return json.dumps(d, sort_keys=True, separators=(",", ":")) + "\n"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InformationTable:
        if d.get("version") != TABLE_VERSION:
            raise ValueError(f"information table version {d.get('version')!r}, expected {TABLE_VERSION}")
        nan = float("nan")
        return cls(
            findings=list(d["findings"]),
            diagnoses=list(d["diagnoses"]),
            n_fd=[list(map(int, r)) for r in d["n_fd"]],
            n_d=list(map(int, d["n_d"])),
            n_interviews=int(d["n_interviews"]),
            iv=[nan if x is None else float(x) for x in d["iv"]],
            physician_order=list(d["physician_order"]),
            positions={k: nan if v is None else float(v) for k, v in d["positions"].items()},
            train_ids=list(d["train_ids"]),
            eval_ids=list(d["eval_ids"]),
            salt=str(d["salt"]),
            eval_fraction=float(d["eval_fraction"]),
            symptom_terms=[(str(s), list(c)) for s, c in d.get("symptom_terms") or []],
            disease_terms=[(str(s), list(c)) for s, c in d.get("disease_terms") or []],
            source=str(d.get("source", "")),
        )

    def symptom_lexicon(self) -> Lexicon:
        return Lexicon(self.symptom_terms)

    def disease_lexicon(self) -> Lexicon:
        return Lexicon(self.disease_terms)


def table_path(path: str | Path | None) -> Path:
    """``path``, or the packaged ``conf/interview/information_res.json``."""
    if path is not None:
        return Path(path)
    return Path(str(resources.files("conf").joinpath(PACKAGED_TABLE)))


def load_table(path: str | Path | None = None) -> InformationTable:
    """Reads a table written by ``build`` (default: the packaged one)."""
    p = table_path(path)
    return InformationTable.from_dict(json.loads(p.read_text(encoding="utf-8")))


def check_disjoint(table: InformationTable, evaluated: Iterable[str]) -> None:
    """Raises ``ValueError`` when an evaluated interview was used to build ``table`` (leakage)."""
    leaked = sorted(set(evaluated) & set(table.train_ids))
    if leaked:
        raise ValueError(
            f"{len(leaked)} evaluated interview(s) are in the information table's training split "
            f"(e.g. {leaked[:5]}): evaluate the eval split (interviews=osce_res_eval) or rebuild the table"
        )


def uses_training_split(agent: Any) -> bool:
    """Whether a ``HistoryAgentConfig`` reads anything learned from the training split."""
    asks = history_mode(agent.mode).asks_questions  # only an agent that picks its questions has a slot order
    return asks and (agent.questioning.policy == "information" or agent.questioning.priorities == "physician")


def split_record(agent: Any, evaluated: Iterable[str]) -> tuple[dict[str, Any], Path] | None:
    """For the run manifest: the split an agent config depends on, after checking no leakage.

    Returns ``None`` for an agent that uses nothing learned from interviews (``paper`` order), else the
    split's description and the table file (to checksum with the data files).

    Raises:
        ValueError: An evaluated interview is in the training split (``check_disjoint``).
    """
    if not uses_training_split(agent):
        return None
    path = table_path(agent.questioning.information_file)
    table = load_table(path)
    ids = sorted(set(evaluated))
    check_disjoint(table, ids)
    record = {
        "table": str(path),
        "salt": table.salt,
        "eval_fraction": table.eval_fraction,
        "train_ids": table.train_ids,
        "eval_ids": table.eval_ids,
        "evaluated_outside_eval_split": sorted(set(ids) - set(table.eval_ids)),
    }
    return record, path


def category_indicators(interview: Interview, annotation: Annotation) -> set[str]:
    """Categories (other than symptom) with a positive answer to one of their questions."""
    by_turn = {t.index: t for t in interview.turns}
    positive: set[str] = set()
    for q in annotation.questions:
        if q.category == "symptom":
            continue
        nxt = by_turn.get(q.turn + 1)
        if nxt is not None and nxt.speaker == "patient" and answer_polarity(nxt.text) == "positive":
            positive.add(q.category)
    return positive


def _restricted_terms(lexicon: Lexicon, names: set[str]) -> list[tuple[str, list[str]]]:
    # Block terms (no canonicals) are kept: they stop a shorter term firing inside a longer phrase.
    return [
        (" ".join(toks), list(cs)) for toks, cs in sorted(lexicon.table.items()) if not cs or set(cs) & names
    ]


def build_table(
    interviews: Sequence[Interview],
    annotator: LexiconAnnotator,
    train_ids: Sequence[str],
    eval_ids: Sequence[str],
    *,
    salt: str,
    eval_fraction: float,
    source: str,
) -> InformationTable:
    """Annotates the training interviews and counts the table (module docstring)."""
    train = set(train_ids)
    rows: list[tuple[set[str], list[str]]] = []
    seqs: list[list[str]] = []
    for interview in interviews:
        if interview.id not in train:
            continue
        ann = annotator.annotate(interview)
        positive = category_indicators(interview, ann)
        feats = set(ann.positive_findings) | {CATEGORY_PREFIX + c for c in positive}
        rows.append((feats, list(dict.fromkeys(ann.diagnoses))))
        seqs.append(ann.category_sequence())
    symptoms = sorted({f for feats, _ in rows for f in feats if not f.startswith(CATEGORY_PREFIX)})
    indicators = [CATEGORY_PREFIX + c for c in INQUIRY_CATEGORIES if c != "symptom"]
    findings = symptoms + indicators
    diagnoses = sorted({d for _, ds in rows for d in ds})
    fi = {f: i for i, f in enumerate(findings)}
    di = {d: j for j, d in enumerate(diagnoses)}
    n_fd = np.zeros((len(findings), len(diagnoses)), dtype=np.int64)
    n_d = np.zeros(len(diagnoses), dtype=np.int64)
    for feats, ds in rows:
        for d in ds:
            n_d[di[d]] += 1
            for f in feats:
                n_fd[fi[f], di[d]] += 1
    iv = kl_information(n_fd) if n_fd.sum() else np.full(len(findings), np.nan)
    pos = mean_positions(seqs, list(INQUIRY_CATEGORIES), which="all")
    order = sorted(
        INQUIRY_CATEGORIES, key=lambda c: (not math.isfinite(pos[c]), pos[c] if math.isfinite(pos[c]) else 0)
    )
    return InformationTable(
        findings=findings,
        diagnoses=diagnoses,
        n_fd=n_fd.tolist(),
        n_d=n_d.tolist(),
        n_interviews=len(rows),
        iv=[float(x) for x in iv],
        physician_order=list(order),
        positions={str(k): float(v) for k, v in pos.items()},
        train_ids=sorted(train_ids),
        eval_ids=sorted(eval_ids),
        salt=salt,
        eval_fraction=eval_fraction,
        symptom_terms=_restricted_terms(annotator.symptoms, set(symptoms)),
        disease_terms=_restricted_terms(annotator.diseases, set(diagnoses)),
        source=source,
    )
