"""The replay patient's matching against what an agent asks: the parts of ``benchmarks/validate_patients.py``
that compare two ways of matching (``eval.replay_keys``) and read an agent's real questions.

Three views of one trade. A question the transcript answers in other words should be answered: its false
"I don't know" is counted on probes (``patient_validation``). A question whose exchange is not there should
get "I don't know": ``left_out_answers`` counts the answers given anyway, with the asked exchange left out
of the replay. And an agent's real questions (``asked_by_agents``) have no gold at all: the share answered
says how much of what the agent asks can reach the agent, not whether it should.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medagent.history.evaluation import patient_validation as pv
from medagent.history.simulation.reference import extract_reference, visible_turns
from medagent.history.simulation.replay import (
    Exchange,
    ReplayPatient,
    exchange_matches,
    transcript_exchanges,
)
from medagent.interview.transcripts import Interview, load_transcripts
from medagent.run.rundir import jsonl_lines


def seen_turns(iv: Interview) -> tuple[Any, ...]:
    """The visible turns of ``iv`` (what the patients answer from)."""
    return visible_turns(iv, extract_reference(iv))


def sample(ps: Sequence[pv.Probe], n: int | None) -> list[pv.Probe]:
    """``n`` of ``ps``, evenly spaced (all when ``n`` is None or not less)."""
    if not n or len(ps) <= n:
        return list(ps)
    step = len(ps) / n
    return [ps[int(k * step)] for k in range(n)]


def left_out_matches(embedder: Any, own: Sequence[pv.Probe], xs: Sequence[Exchange], keys: str) -> np.ndarray:
    """Each physician question's scores against the exchanges (``exchange_matches``), its own exchange left
    out (-1): the replay the question meets when the transcript does not hold what it asks."""
    sims = exchange_matches(embedder, [p.question for p in own], xs, keys)
    for k, p in enumerate(own):
        sims[k, p.exchange] = -1.0
    return sims


def left_out_answers(
    seen: dict[str, Any], embedder: Any, thr: float, keys: str, max_probes: int | None
) -> dict[str, list[bool]]:
    """Per interview, for each sampled physician question with its own exchange left out of the replay:
    whether the patient still answers (with another exchange's words, mostly not about what was asked).
    The other side of a lower threshold or looser keys: fewer false "I don't know", more of these."""
    out: dict[str, list[bool]] = {}
    for i, turns in seen.items():
        xs = transcript_exchanges(turns)
        sims = left_out_matches(embedder, sample(pv.probes(i, turns, "own"), max_probes), xs, keys)
        out[i] = [bool(row.max() >= thr) for row in sims] if len(xs) > 1 else []
    return out


def compare_keys(
    by_name: dict[tuple[str, str], list[pv.ProbeResult]],
    keys_list: list[str],
    thresholds: dict[str, float],
    seen: dict[str, Any],
    embedder: Any,
    max_probes: int | None,
    wordings: list[str],
) -> list[pv.PairedRate]:
    """The two replay keys on the same probes, paired by interview: false "not sure" in each wording that
    can miss, and answers given with the asked exchange left out."""
    a, b = keys_list
    na, nb = f"replay[{a}]", f"replay[{b}]"
    rows = []
    for wording in (w for w in wordings if w != "own"):
        per = {
            n: _by_interview([r for r in by_name[(n, wording)] if r.n_gold], lambda r: r.no_answer)
            for n in (na, nb)
        }
        rows.append(pv.paired_rates(f"false not sure ({wording} wording)", na, per[na], nb, per[nb]))
    left = {k: left_out_answers(seen, embedder, thresholds[k], k, max_probes) for k in keys_list}
    rows.append(pv.paired_rates("answers with the asked exchange left out", na, left[a], nb, left[b]))
    return rows


def _by_interview(
    results: list[pv.ProbeResult], outcome: Callable[[pv.ProbeResult], bool]
) -> dict[str, list[bool]]:
    out: dict[str, list[bool]] = {}
    for r in results:
        out.setdefault(r.probe.interview_id, []).append(bool(outcome(r)))
    return out


def asked_probes(dirs: Sequence[Path], ids: Sequence[str]) -> list[pv.Probe]:
    """The questions an agent really asked (each arm dir's ``interviews.jsonl``) in the interviews ``ids``,
    after the opening, as probes without gold (``wording="asked"``): what the patients are asked in the
    experiment, where no real answer says what they should reply."""
    out: list[pv.Probe] = []
    wanted = set(ids)
    for d in dirs:
        for line in jsonl_lines((d / "interviews.jsonl").read_text(encoding="utf-8")):
            r = json.loads(line)
            if r["interview_id"] not in wanted:
                continue
            for k, x in enumerate((r.get("simulator") or [])[1:], start=1):
                out.append(pv.Probe(r["interview_id"], k, x["question"], (), "asked"))
    return out


def asked_by_agents(
    dirs: list[Path], embedder: Any, thr: float, keys: str, data_root: str | None
) -> dict[str, dict[str, Any]]:
    """How many of the questions an agent really asked (each arm dir's ``interviews.jsonl``) the replay
    patient answers at ``thr`` with ``keys``. There is no gold for them: an "I don't know" may be right
    (the physician never asked), so this is the answered share, beside the probes' false "not sure"."""
    out: dict[str, dict[str, Any]] = {}
    for d in dirs:
        rows = [
            json.loads(line) for line in jsonl_lines((d / "interviews.jsonl").read_text(encoding="utf-8"))
        ]
        ivs = {
            iv.id: iv for iv in load_transcripts("RES", data_root, ids=[r["interview_id"] for r in rows])[0]
        }
        scores: list[float] = []
        for r in rows:
            patient = ReplayPatient(seen_turns(ivs[r["interview_id"]]), embedder, thr, keys=keys)
            # The opening question is every arm's; what differs is what the agent asked after it.
            scores += [patient.match(x["question"])[1] for x in (r.get("simulator") or [])[1:]]
        # Arm dirs of different runs share names (``amq``): key by run and arm when the names clash.
        key = d.name if sum(x.name == d.name for x in dirs) == 1 else f"{d.parent.parent.name}/{d.name}"
        out[key] = {
            "interviews": len(rows), "questions": len(scores),
            "answered": round(sum(s >= thr for s in scores) / max(1, len(scores)), 3),
            "median_score": round(float(sorted(scores)[len(scores) // 2]), 3) if scores else None,
        }  # fmt: skip
    return out
