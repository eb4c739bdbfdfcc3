"""Validation of the simulated patients on the physicians' own questions of held-out interviews.

**Probes.** Each exchange of an interview's visible part (a physician's question and the real patient's
answer) is one probe: the question is posed to the patient built over that interview, and the real answer
is the gold. The question is posed in the physician's ``own`` wording, or in ``other`` wording: the
closest question (sentence-embedding cosine) that a physician asked in a *different* interview of the same
split, or in ``agent`` wording: the agent's model asking for the same thing in its own voice
(``agent_wording``: complete, filler-free, often two questions in one). Own wording is the easy case for
the replay patient (its index holds the very question); other wording tests its retrieval on another
physician's words, agent wording on the words an agent actually sends.

**Units.** The gold of a probe is the case units resting on its real answer: the interview's facts whose
quote is in the answer's patient turns (``units="facts"``: the extracted fact set), or the answer's
sentences (``units="sentences"``: no model needed, each sentence its own unit).

**Measures**, over a patient's probes (``PatientScores``):

* **supported**: the share of answers the transcript supports: a "not in my case" reply
  (``facts_metrics.is_no_answer``) to a probe whose real answer holds no unit, or an answer each clause of
  which is the patient's words verbatim or states a unit of the case (``FactMatcher``);
* **disclosed**: the share of the gold units that the answers state (over probes that have some);
* **false not sure**: the share of probes with gold units that got a "not in my case" reply;
* **invented**: the share of answer clauses supported by nothing in the case (neither verbatim nor a unit).

**Replay threshold** (``choose_threshold``): on training interviews, each probe's best cosine and whether
the replayed exchange states a gold unit, for probes in other wording (the answer is in the transcript)
and in own wording with the asked exchange left out of the replay (the answer may not be: "I don't know"
can be right); the threshold maximises (right answers − wrong answers) among the answered, a "not in my
case" counting 0: answer when a match is more often right than wrong.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from medagent.history.agent.redundancy import TextEmbedder, cosine_matrix
from medagent.history.evaluation.facts_metrics import FactMatcher, clauses, is_no_answer
from medagent.history.facts.store import Fact, FactSet, normalise
from medagent.history.simulation.replay import Exchange, transcript_exchanges
from medagent.interview.types import Turn

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class CachedEmbedder:
    """A ``TextEmbedder`` that encodes each distinct text once (validation asks about the same questions,
    sentences and clauses many times); vectors are the wrapped embedder's."""

    def __init__(self, embedder: TextEmbedder) -> None:
        self.embedder = embedder
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if new:
            for t, v in zip(new, np.asarray(self.embedder.encode(new), dtype=np.float32), strict=True):
                self._cache[t] = v
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])


@dataclass(frozen=True)
class Probe:
    """One physician question posed to a patient, with the exchange it comes from."""

    interview_id: str
    exchange: int
    question: str
    gold_turns: tuple[int, ...]
    wording: str


def probes(
    interview_id: str,
    turns: Sequence[Turn],
    wording: str,
    *,
    pool: Sequence[tuple[str, str]] = (),
    embedder: TextEmbedder | None = None,
    reworded: Mapping[str, str] | None = None,
) -> list[Probe]:
    """The probes of one interview; ``other`` wording needs ``pool`` ((interview id, question) of other
    interviews) and the ``embedder``; ``agent`` wording needs ``reworded`` (physician question -> the
    agent model's wording, ``agent_wording.reword``), and an exchange without one has no probe."""
    xs = transcript_exchanges(turns)
    if wording == "own":
        return [Probe(interview_id, x.index, x.doctor, x.patient_turns, wording) for x in xs]
    if wording == "agent":
        if reworded is None:
            raise ValueError("agent wording needs the rewordings (agent_wording.reword)")
        return [
            Probe(interview_id, x.index, reworded[x.doctor], x.patient_turns, wording)
            for x in xs
            if x.doctor in reworded
        ]
    if wording != "other":
        raise ValueError(f"wording must be 'own', 'other' or 'agent', got {wording!r}")
    others = [q for i, q in pool if i != interview_id]
    if embedder is None or not others or not xs:
        raise ValueError("other wording needs an embedder and questions of other interviews")
    sims = cosine_matrix(
        np.asarray(embedder.encode([x.doctor for x in xs]), dtype=np.float32),
        np.asarray(embedder.encode(others), dtype=np.float32),
    )
    return [
        Probe(interview_id, x.index, others[int(np.argmax(row))], x.patient_turns, wording)
        for x, row in zip(xs, sims, strict=True)
    ]


def sentence_units(interview_id: str, turns: Sequence[Turn]) -> FactSet:
    """Each sentence of each patient turn as a unit (``units="sentences"``)."""
    fs = FactSet(interview_id, "", "sentences", "")
    for t in turns:
        if t.speaker != "patient":
            continue
        for s in _SENTENCE_END.split(t.text.strip()):
            if any(c.isalnum() for c in s):
                fs.facts.append(
                    Fact(f"{interview_id}:S{len(fs.facts) + 1}", "other", s, "present", s, t.index)
                )
    return fs


@dataclass
class ProbeResult:
    probe: Probe
    answer: str
    n_gold: int
    n_disclosed: int
    no_answer: bool
    clauses: int
    clauses_supported: int

    @property
    def supported(self) -> bool:
        if self.no_answer:
            return self.n_gold == 0
        return self.clauses_supported == self.clauses


def score_answer(
    probe: Probe, answer: str, units: FactSet, turns: Sequence[Turn], matcher: FactMatcher
) -> ProbeResult:
    """One probe's answer against the case (module docstring)."""
    gold = [u for u in units.facts if u.turn in probe.gold_turns]
    no = is_no_answer(answer)
    disclosed = 0 if no else len(matcher.stated(gold, [answer]))
    parts = [] if no else clauses(answer)
    patient = [normalise(t.text) for t in turns if t.speaker == "patient"]
    verbatim = [any(normalise(p) in t for t in patient) for p in parts]
    rest = [p for p, v in zip(parts, verbatim, strict=True) if not v]
    ok = sum(verbatim) + sum(matcher.clause_support(units.facts, rest))
    return ProbeResult(probe, answer, len(gold), disclosed, no, len(parts), ok)


@dataclass(frozen=True)
class PatientScores:
    """The validation table's row of one patient (module docstring)."""

    patient: str
    wording: str
    units: str
    interviews: int
    probes: int
    supported: float
    disclosed: float
    false_not_sure: float
    invented: float
    answerable: int
    gold_units: int
    clauses: int

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def summarise(patient: str, wording: str, units: str, results: Sequence[ProbeResult]) -> PatientScores:
    answerable = [r for r in results if r.n_gold]
    gold = sum(r.n_gold for r in answerable)
    n_clauses = sum(r.clauses for r in results)
    return PatientScores(
        patient=patient,
        wording=wording,
        units=units,
        interviews=len({r.probe.interview_id for r in results}),
        probes=len(results),
        supported=sum(r.supported for r in results) / len(results) if results else float("nan"),
        disclosed=sum(r.n_disclosed for r in answerable) / gold if gold else float("nan"),
        false_not_sure=sum(r.no_answer for r in answerable) / len(answerable) if answerable else float("nan"),
        invented=(n_clauses - sum(r.clauses_supported for r in results)) / n_clauses if n_clauses else 0.0,
        answerable=len(answerable),
        gold_units=gold,
        clauses=n_clauses,
    )


@dataclass(frozen=True)
class AskedScores:
    """How a patient answers questions that have no gold (an agent's own, ``replay_validation.asked_probes``):
    the share it answers at all, the share it answers with every clause supported by the case (the patient's
    words verbatim, or a unit of the case), and the share of answer clauses supported by nothing. Whether an
    "I don't know" was right cannot be told here; a patient that answers more while inventing no more says
    that the other's "I don't know" was, at least in part, a miss."""

    patient: str
    interviews: int
    questions: int
    answered: float
    answered_supported: float
    invented: float
    clauses: int

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def summarise_asked(patient: str, results: Sequence[ProbeResult]) -> AskedScores:
    n = len(results)
    answered = [r for r in results if not r.no_answer]
    n_clauses = sum(r.clauses for r in results)
    return AskedScores(
        patient=patient,
        interviews=len({r.probe.interview_id for r in results}),
        questions=n,
        answered=len(answered) / n if n else float("nan"),
        answered_supported=sum(r.clauses_supported == r.clauses for r in answered) / n if n else float("nan"),
        invented=(n_clauses - sum(r.clauses_supported for r in results)) / n_clauses if n_clauses else 0.0,
        clauses=n_clauses,
    )


def asked_table(rows: Sequence[AskedScores]) -> str:
    head = "| patient | interviews | questions | answered | answered, supported | invented | clauses |"
    out = [head, "|---|---|---|---|---|---|---|"]
    out += [
        f"| {r.patient} | {r.interviews} | {r.questions} | {r.answered:.3f} | {r.answered_supported:.3f} "
        f"| {r.invented:.3f} | {r.clauses} |"
        for r in rows
    ]
    return "\n".join(out)


async def run_probes(
    answer: Callable[[str], Awaitable[str]],
    ps: Sequence[Probe],
    units: FactSet,
    turns: Sequence[Turn],
    matcher: FactMatcher,
) -> list[ProbeResult]:
    """Poses each probe to one patient (``answer``) and scores it."""
    return [score_answer(p, await answer(p.question), units, turns, matcher) for p in ps]


def choose_threshold(
    sims: Sequence[float], correct: Sequence[bool], grid: Sequence[float] = tuple(np.arange(0.1, 0.96, 0.05))
) -> tuple[float, int]:
    """The threshold of ``grid`` that maximises right − wrong among the probes answered (``sim >= t``);
    ties go to the lower threshold (fewer false "not sure"). Returns it and its utility."""
    s = np.asarray(sims, dtype=float)
    c = np.asarray(correct, dtype=bool)
    best = (float(grid[0]), -(10**9))
    for t in grid:
        on = s >= t
        u = int(c[on].sum() - (~c[on]).sum())
        if u > best[1]:
            best = (round(float(t), 2), u)
    return best


def replay_outcomes(
    xs: Sequence[Exchange], ps: Sequence[Probe], sims: np.ndarray, units: FactSet, matcher: FactMatcher
) -> list[tuple[float, bool]]:
    """For ``choose_threshold``: each probe's best cosine (``sims``: probes × exchanges) and whether the
    best exchange's answer states a gold unit of the probe (probes without gold units are left out)."""
    out: list[tuple[float, bool]] = []
    for p, row in zip(ps, sims, strict=True):
        gold = [u for u in units.facts if u.turn in p.gold_turns]
        if not gold or not len(row):
            continue
        j = int(np.argmax(row))
        out.append((float(row[j]), bool(matcher.stated(gold, [xs[j].patient]))))
    return out


def matcher_agreement(units: FactSet, turns: Sequence[Turn], matcher: FactMatcher) -> dict[str, float | int]:
    """How the embedding match (quotes off) agrees with annotated units: for each patient turn that has
    units, the share of its own units it finds (``recall``) and the share of the units it finds there that
    were annotated on another turn (``other_turn``: a false match, or a finding said again elsewhere)."""
    own = found = own_found = 0
    for t in turns:
        mine = {u.id for u in units.facts if u.turn == t.index}
        if t.speaker != "patient" or not mine:
            continue
        hits = matcher.stated(units.facts, [t.text], quotes=False)
        own += len(mine)
        found += len(hits)
        own_found += len(hits & mine)
    return {
        "units": own,
        "recall": own_found / own if own else 0.0,
        "other_turn": (found - own_found) / found if found else 0.0,
        "threshold": matcher.threshold,
    }


def table(rows: Sequence[PatientScores]) -> str:
    """The validation table, one line per (patient, wording, units)."""
    head = (
        "| patient | wording | units | interviews | probes | supported | disclosed | false not sure | "
        "invented | answerable probes | gold units | answer clauses |"
    )
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r.patient} | {r.wording} | {r.units} | {r.interviews} | {r.probes} | {r.supported:.3f} | "
            f"{r.disclosed:.3f} | {r.false_not_sure:.3f} | {r.invented:.3f} | {r.answerable} | "
            f"{r.gold_units} | {r.clauses} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class PairedRate:
    """``b − a`` of one per-interview rate over the interviews both have probes for (``paired_rates``)."""

    measure: str
    a: str
    b: str
    n: int
    mean_a: float
    mean_b: float
    diff: float
    t_low: float | None
    t_high: float | None
    p: float | None


def paired_rates(
    measure: str, a_name: str, a: Mapping[str, Sequence[bool]], b_name: str, b: Mapping[str, Sequence[bool]]
) -> PairedRate:
    """Two patients' rates of one outcome (``a``/``b``: interview id -> the outcome of each probe), paired
    by interview: the interview is the unit (its probes share a transcript), with a Student-t CI and a
    sign-flip p of the mean difference."""
    from medagent.history.evaluation.paired import sign_flip_p, t_interval

    ids = sorted(i for i in a.keys() & b.keys() if len(a[i]) and len(b[i]))
    ra = np.array([np.mean(a[i]) for i in ids], dtype=float)
    rb = np.array([np.mean(b[i]) for i in ids], dtype=float)
    d = (rb - ra).tolist()
    lo, hi = t_interval(d)
    return PairedRate(
        measure, a_name, b_name, len(ids), _mean(ra), _mean(rb), _mean(rb - ra), lo, hi, sign_flip_p(d)
    )


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if x.size else float("nan")


def _signed(v: float | None) -> str:
    return "–" if v is None else f"{v:+.3f}"


def _p(v: float | None) -> str:
    return "–" if v is None else f"{v:.4f}"


def paired_rates_table(rows: Sequence[PairedRate]) -> str:
    """The rows with Holm's correction over them, as markdown."""
    from medagent.history.evaluation.paired import holm

    adj = holm([r.p for r in rows])
    out = [
        "| measure | a | b | interviews | a | b | b − a | 95% t CI | sign-flip p | Holm p |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, ph in zip(rows, adj, strict=True):
        out.append(
            f"| {r.measure} | {r.a} | {r.b} | {r.n} | {r.mean_a:.3f} | {r.mean_b:.3f} | {r.diff:+.3f} | "
            f"[{_signed(r.t_low)}, {_signed(r.t_high)}] | {_p(r.p)} | {_p(ph)} |"
        )
    return "\n".join(out)
