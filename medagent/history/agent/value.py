"""The expected value of asking each missing slot, from the state and the training table (``policy=information``).

For a state with differential ``pi`` (over the table's diagnoses, see ``differential``), every missing slot
``s`` of category ``c`` among the candidates ``S`` gets

    V(s) = w_gain * g(s) / max_S g + I(s) / max_S I,    I(s) = max over unknown findings f of s of
                                                              [ w_iv * p(f) * KL(pi_f || pi) + w_h * dH(f) ]

so both terms are on one scale: each is **normalised per turn** by its largest value over the candidates
(a term that is 0 for every candidate stays 0). The information term is in nats and the completeness gain a
share of weights, so neither can decide the order by its units alone (unnormalised, the information term,
0.003-0.035 nats, was an order of magnitude below the gains, 0.02-0.10, which alone set the order).

* ``g(s) = w_c / n_c``: the completeness the slot adds (``phases.completeness``), so a category without any
  informative finding left still has a value and stays reachable;
* findings of a slot: the symptom findings for the ``symptom`` slot (asking about a symptom finding is how
  one is brought out), the indicator ``category:<c>`` for the other categories
  (``medagent.history.agent.information``); the symptom *attributes* (onset, duration, severity, ...) have
  no finding of their own in the table (it counts findings by diagnosis, not attributes), so their
  information term is 0 and each is valued by its completeness gain alone, and their question names the
  finding it characterises (the first finding the patient reported); a finding is unknown while no
  patient answer mentions it (symptoms: the table's lexicon; indicators: no slot of ``c`` asked or filled);
* ``L(f|d) = (N_fd + a) / (N_d + 2a)`` with Laplace ``a = 1`` (a binary finding per interview), so a finding
  seen once does not claim certainty; ``p(f) = sum_d pi(d) L(f|d)``; ``pi_f`` the posterior if ``f`` is
  present;
* ``p(f) * KL(pi_f || pi)``: the information value of the finding for the *current* differential
  (the network analysis' IV with ``pi`` as the prior, computed by ``kl_information``), weighted by the
  chance the answer reveals it;
* ``dH(f) = H(pi) - E[H(pi | f present or absent)]``: the expected entropy reduction of the differential,
  the mutual information of the finding and the diagnosis under ``pi`` (``mutual_information`` of the
  2 x |D| joint table).

The differential ``pi``: each hypothesis' probability is shared among the table diagnoses its name
mentions (the table's disease lexicon); unmatched mass is dropped; then ``pi = (1 - m) pi + m P(D)`` with
``m = information_prior_mix`` and ``P(D)`` the training share of each diagnosis, which also stands in
for an empty or unmatched differential.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from medagent.history.agent.information import CATEGORY_PREFIX, InformationTable
from medagent.history.agent.state import SLOT_BY_NAME, InterviewState, slots_of
from medagent.interview.annotate.matcher import Lexicon
from medagent.interview.information import kl_information, mutual_information

LAPLACE = 1.0
SYMPTOM_SLOT = "symptom"  # the symptom category's finding slot; its other slots are attributes


@dataclass(frozen=True)
class SlotValue:
    """``V(s)`` and its parts, for the trace and the question prompt (``best`` = the finding that gave the
    information term, or for a symptom attribute the reported finding it characterises)."""

    slot: str
    value: float
    gain: float
    information: float
    best: str


class InformationModel:
    """Likelihoods and lexicons of one ``InformationTable`` (built once per agent)."""

    def __init__(self, table: InformationTable) -> None:
        self.table = table
        self.findings = list(table.findings)
        self.diagnoses = list(table.diagnoses)
        n_fd = np.asarray(table.n_fd, dtype=float).reshape(len(self.findings), len(self.diagnoses))
        n_d = np.asarray(table.n_d, dtype=float)
        self.likelihood: NDArray[np.float64] = (n_fd + LAPLACE) / (n_d[None, :] + 2 * LAPLACE)
        self.prior: NDArray[np.float64] = (
            n_d / n_d.sum() if n_d.sum() else np.full(len(n_d), 1 / max(len(n_d), 1))
        )
        self.symptoms: Lexicon = table.symptom_lexicon()
        self.diseases: Lexicon = table.disease_lexicon()
        self._col = {d: j for j, d in enumerate(self.diagnoses)}
        self.category_rows: dict[str, list[int]] = {}
        for i, f in enumerate(self.findings):
            cat = f[len(CATEGORY_PREFIX) :] if f.startswith(CATEGORY_PREFIX) else "symptom"
            self.category_rows.setdefault(cat, []).append(i)

    def differential(self, state: InterviewState, prior_mix: float) -> NDArray[np.float64]:
        """``pi`` over the table's diagnoses (module docstring)."""
        pi = np.zeros(len(self.diagnoses))
        for h in state.differential:
            cols = [self._col[n] for n in self.diseases.names_in(h.diagnosis) if n in self._col]
            for j in cols:
                pi[j] += h.probability / len(cols)
        if pi.sum() <= 0:
            return self.prior.copy()
        pi /= pi.sum()
        return (1 - prior_mix) * pi + prior_mix * self.prior

    def known(self, state: InterviewState) -> set[int]:
        """Rows whose finding the patient has already spoken about (either polarity)."""
        text = " ".join([q.answer or "" for q in state.asked] + [v.value for v in state.slots.values()])
        said = set(self.symptoms.names_in(text))
        rows = {i for i, f in enumerate(self.findings) if f in said}
        for cat, idx in self.category_rows.items():
            if cat != "symptom" and any(n in state.slots or state.asks_of(n) for n in slots_of(cat)):
                rows.update(idx)
        return rows

    def finding_scores(self, pi: NDArray[np.float64], w_iv: float, w_h: float) -> NDArray[np.float64]:
        """``w_iv * p(f) * KL(pi_f || pi) + w_h * dH(f)`` for every row."""
        joint = self.likelihood * pi[None, :]  # P(f present, d) under pi, one row per finding
        p_f = joint.sum(axis=1)
        # kl_information normalises each row to P(d | f) and, with the 'prevalence' prior given pi, returns
        # KL(pi_f || pi): the network's information value with the current differential as the prior.
        kl = kl_information(joint, "prevalence", diagnosis_counts=pi)
        absent = (1 - self.likelihood) * pi[None, :]
        dh = np.array(
            [mutual_information(np.vstack([joint[i], absent[i]])) for i in range(len(self.findings))]
        )
        return w_iv * p_f * np.nan_to_num(kl) + w_h * dh

    def slot_values(
        self,
        state: InterviewState,
        slots: list[str],
        weights: Mapping[str, float],
        *,
        w_gain: float,
        w_iv: float,
        w_h: float,
        prior_mix: float,
    ) -> dict[str, SlotValue]:
        """``V(s)`` for each of ``slots`` (module docstring)."""
        scores = self.finding_scores(self.differential(state, prior_mix), w_iv, w_h)
        known = self.known(state)
        reported = self.reported(state)
        raw: dict[str, tuple[float, float, str]] = {}
        for name in slots:
            cat = SLOT_BY_NAME[name].category
            gain = weights.get(cat, 0.0) / len(slots_of(cat))
            if cat == "symptom" and name != SYMPTOM_SLOT:  # an attribute: no finding of its own
                raw[name] = (gain, 0.0, reported)
                continue
            rows = [i for i in self.category_rows.get(cat, []) if i not in known]
            row = max(rows, key=lambda i: scores[i]) if rows else None
            info = float(scores[row]) if row is not None else 0.0
            raw[name] = (gain, info, self.findings[row] if row is not None else "")
        top_gain = max((g for g, _, _ in raw.values()), default=0.0)
        top_info = max((i for _, i, _ in raw.values()), default=0.0)
        out: dict[str, SlotValue] = {}
        for name, (gain, info, finding) in raw.items():
            value = w_gain * (gain / top_gain if top_gain > 0 else 0.0) + (
                info / top_info if top_info > 0 else 0.0
            )
            out[name] = SlotValue(name, value, gain, info, finding)
        return out

    def reported(self, state: InterviewState) -> str:
        """The first symptom finding the patient reported (what an attribute question characterises)."""
        text = " ".join(q.answer or "" for q in state.asked)
        names = [n for n in self.symptoms.names_in(text) if n in set(self.findings)]
        return names[0] if names else ""
