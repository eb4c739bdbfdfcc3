"""Interview metrics: one record per interview, and their aggregate.

* **ROUGE-L F1** (``rouge_l``): Google's ``rouge-score`` ``rougeL`` F-measure without stemming (longest
  common subsequence of lower-cased ``[a-z0-9]+`` tokens, ``F = 2PR / (P + R)``).
* **BERTScore F1** (``BertScorer``): the ``bert-score`` package on a local model folder resolved by
  ``medagent.models`` (the PyPI-shipped all-mpnet-base-v2, layer 8, no baseline rescaling; MODELS.md).
* Both against the physician's closing statement (``reference``); interviews without a usable statement are
  left out of the text metrics and counted. An invalid assessment scores 0 on both (declared failure score).
* **Turns** per interview (single_shot: 1), **blocked-question rate** ``blocked / (asked + blocked)`` (what
  redundancy control refused) and **redundant-question rate** (share of *asked* questions that repeat an
  earlier one verbatim or at cosine >= 0.75: 0 by construction for amq with the same embedder), and the
  **lexical repeat rate**, a check independent of that control (``repeats.TopicRepeats``: same inquiry
  category, same ontology concepts, content-word Jaccard >= 0.5; filled at the driver by
  ``add_lexical_repeats`` from the asked questions).
* **Red-flag recall** ``|agent ∩ reference| / |reference|`` where the reference red flags are what an LLM
  extracts from the full transcript (``RedFlagExtractor``, same red-flag list as the agent); None when the
  transcript has none, and for the single-shot baseline, which keeps no red-flag state (left out of the mean).
* **Differential hit**: 1 when any diagnosis of the agent's differential matches a gold diagnosis after
  canonicalisation (the ontology's disease lexicon when given, else normalised text equality or
  containment). Gold: MediTOD's annotated diagnoses where they exist; on every other interview the
  diagnoses the physician states in the full transcript, found by the lexicon annotator
  (``LexiconAnnotator.diagnoses``: diseases of the MediTOD ontology named with a diagnostic cue or in the
  closing turns; ``add_physician_hits``, at the driver, scorer only). Interviews where it finds none are
  left out (``differential_n`` counts the others). **Top-3 differential hit**: the same test over the
  first three diagnoses of the differential only (ranked as the agent ranked them).
* **Fact endpoints** (``facts_metrics``): elicited-fact recall, summary fact recall (the primary endpoint)
  and precision against the case's facts extracted from the patient's own turns (``medagent.history.facts``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

from medagent.config import InterviewEvalConfig
from medagent.history.agent.amq import InterviewResult
from medagent.history.agent.modes import history_mode
from medagent.history.agent.redundancy import TextEmbedder, redundant_share
from medagent.history.evaluation import fidelity
from medagent.history.evaluation.record import InterviewRecord
from medagent.history.evaluation.row import InterviewRow
from medagent.history.simulation.reference import Reference, quote_supports, red_flags_model, render_turns
from medagent.history.simulation.simulator import fidelity_shares
from medagent.interview.transcripts import Interview
from medagent.llm.base import ChatModel
from medagent.llm.structured import ask
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt

_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


@functools.cache
def _rouge_l_scorer() -> Any:
    # Imported on first score: rouge-score pulls in nltk (about 1.5 s), which importers that never score
    # (the record and report types) should not pay.
    from rouge_score.rouge_scorer import RougeScorer

    # No stemming: the reported ROUGE-L values (docs/results) were computed on unstemmed tokens, and
    # rouge-score's Porter stemmer would merge forms such as "swab"/"swabs" and move them.
    return RougeScorer(["rougeL"], use_stemmer=False)


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 of two texts (0 when either has no token)."""
    return float(_rouge_l_scorer().score(reference, prediction)["rougeL"].fmeasure)


class BertScorer:
    """BERTScore F1 with a local model folder, loaded once (``score`` batches pairs)."""

    def __init__(
        self, model_path: str, num_layers: int, batch_size: int = 8, device: str | None = None
    ) -> None:
        from bert_score import BERTScorer

        self._scorer = BERTScorer(
            model_type=model_path, num_layers=num_layers, batch_size=batch_size, device=device or "cpu"
        )

    @classmethod
    def from_config(cls, cfg: InterviewEvalConfig, device: str | None = None) -> BertScorer:
        from medagent.models import resolve_model

        path = resolve_model(cfg.bertscore_model.spec())
        return cls(
            str(path), cfg.bertscore_num_layers, cfg.bertscore_batch_size, device or cfg.bertscore_device
        )

    def score(self, predictions: Sequence[str], references: Sequence[str]) -> list[float]:
        if not predictions:
            return []
        _p, _r, f = self._scorer.score(list(predictions), list(references))
        return [float(x) for x in f.tolist()]


class RedFlagExtractor:
    """Reference red flags: an LLM reads the full transcript in chunks and names the red flags present,
    each with the patient's words that show it; a flag whose quote is not the patient's affirmed words in
    that chunk (``quote_supports``) is dropped and recorded. Without that check the 1.5B CPU model named
    3-8 of the 8 flags in every RES transcript (session 4), which made red-flag recall meaningless."""

    def __init__(
        self, llm: ChatModel, red_flags: dict[str, str], cfg: InterviewEvalConfig, *, json_schema: bool = True
    ) -> None:
        self.llm = llm
        self.red_flags = red_flags
        self.cfg = cfg
        self.json_schema = json_schema

    async def extract(self, interview: Interview, log: UsageRecord) -> list[str]:
        from medagent.interview.annotate.llm import chunk_turns

        output = red_flags_model(tuple(self.red_flags))
        found: list[str] = []
        for chunk in chunk_turns(interview.turns, self.cfg.red_flag_chunk_tokens):
            reply = await ask(
                self.llm,
                load_prompt("history_red_flags").render(
                    transcript=render_turns(chunk), red_flag_definitions=self.red_flags
                ),
                output,
                prompt="history_red_flags",
                schema_name="red_flags",
                json_schema_ok=self.json_schema,
                tag=f"red flags (turns {chunk[0].index}-{chunk[-1].index})",
                usage=log,
                max_tokens=self.cfg.red_flag_max_tokens,
                max_retries=1,
            )
            flags = reply.value.red_flags if reply.value else []
            patient = [t.text for t in chunk if t.speaker == "patient"]
            for fid, quote in ((f.id, f.quote) for f in flags if f.id in self.red_flags):
                if not quote_supports(quote, patient):
                    log.errors.append(
                        f"red flags: {fid} dropped, {quote[:80]!r} is not the patient's affirmed words"
                    )
                elif fid not in found:
                    found.append(fid)
        return found


def _norm(text: str) -> str:
    return " ".join(tokens(text))


def differential_hit(
    predicted: Sequence[str], gold: Sequence[str], canonical: Callable[[str], list[str]] | None = None
) -> bool:
    """Whether any predicted diagnosis matches a gold one (module docstring)."""

    def forms(x: str) -> set[str]:
        out = {_norm(x)}
        if canonical is not None:
            out |= {_norm(c) for c in canonical(x.lower())}
        return out - {""}

    gold_forms = set().union(*(forms(g) for g in gold)) if gold else set()
    for p in predicted:
        for f in forms(p):
            if f in gold_forms or any(f in g or g in f for g in gold_forms if min(len(f), len(g)) >= 4):
                return True
    return False


def physician_diagnoses(
    interviews: Sequence[Interview], data_root: str | None = None
) -> dict[str, list[str]]:
    """Interview id -> the diagnoses its physician states, by the lexicon annotator (module docstring)."""
    from medagent.interview.annotate.lexicon import LexiconAnnotator
    from medagent.interview.meditod import load_ontology

    annotator = LexiconAnnotator.from_ontology(load_ontology(data_root))
    return {iv.id: dx for iv in interviews if (dx := annotator.diagnoses(iv))}


def disease_canonical(data_root: str | None = None) -> Callable[[str], list[str]]:
    """``text -> canonical disease names`` of the ontology's disease lexicon (matches synonyms)."""
    from medagent.interview.annotate.vocab import build_disease_lexicon
    from medagent.interview.meditod import load_ontology

    return build_disease_lexicon(load_ontology(data_root)).names_in  # type: ignore[no-any-return]


def add_lexical_repeats(
    records: Sequence[InterviewRecord], rows: dict[str, dict[str, Any]], repeats: Any
) -> None:
    """Fills ``repeat_rate_lexical`` from each row's asked questions (``repeats``: a ``TopicRepeats``)."""
    for r in records:
        row = rows.get(r.interview_id)
        if r.error is None:
            asked = InterviewRow.from_dict(row).asked if row is not None else []
            r.repeat_rate_lexical = repeats.rate(asked)


def add_physician_hits(
    records: Sequence[InterviewRecord],
    gold: dict[str, list[str]],
    canonical: Callable[[str], list[str]] | None = None,
) -> int:
    """Fills ``differential_hit`` against ``gold`` where no annotated gold was scored; returns how many."""
    n = 0
    for r in records:
        if r.error is None and r.differential_hit is None and (dx := gold.get(r.interview_id)):
            r.gold_diagnoses = list(dx)
            r.differential_hit = differential_hit(r.differential, dx, canonical)
            r.differential_top3_hit = differential_hit(r.differential[:3], dx, canonical)
            n += 1
    return n


def interview_record(
    interview: Interview,
    result: InterviewResult,
    reference: Reference,
    *,
    embedder: TextEmbedder | None = None,
    redundancy_threshold: float = 0.75,
    reference_red_flags: list[str] | None = None,
    gold_diagnoses: list[str] | None = None,
    canonical: Callable[[str], list[str]] | None = None,
    fidelity_labels: Sequence[str] = (),
) -> InterviewRecord:
    """Scores one finished interview (BERTScore is added in batch by ``add_bertscore``)."""
    a = result.assessment
    asked = [q.text for q in result.final_state.asked]
    blocked = result.blocked
    agent_flags = list(result.final_state.red_flags)
    recall = None
    if reference_red_flags and history_mode(result.mode).tracks_red_flags:
        recall = len(set(agent_flags) & set(reference_red_flags)) / len(set(reference_red_flags))
    dx = [d.diagnosis for d in a.differential] or [h.diagnosis for h in result.final_state.differential]
    hit = differential_hit(dx, gold_diagnoses, canonical) if gold_diagnoses else None
    top3 = differential_hit(dx[:3], gold_diagnoses, canonical) if gold_diagnoses else None
    text = a.text() if a.valid else ""
    asks = history_mode(result.mode).asks_questions
    refused = result.final_state.refused
    return InterviewRecord(
        interview_id=interview.id,
        source=interview.source,
        mode=result.mode,
        prediction=text,
        reference=reference.statement,
        reference_usable=reference.usable,
        valid=a.valid,
        n_turns=result.n_turns,
        asked=len(asked),
        blocked=blocked,
        blocked_rate=blocked / (len(asked) + blocked) if asked or blocked else 0.0,
        redundant_rate=redundant_share(asked, embedder, redundancy_threshold),
        finish_reason=result.finish_reason,
        red_flags_agent=agent_flags,
        red_flags_reference=reference_red_flags,
        red_flag_recall=recall,
        differential=dx,
        gold_diagnoses=gold_diagnoses,
        differential_hit=hit,
        differential_top3_hit=top3,
        rouge_l=rouge_l(text, reference.statement) if reference.usable else None,
        fidelity=fidelity_shares(fidelity_labels),
        n_judged=len(fidelity_labels),
        refused_slots=sum(r.kind == "slot" for r in refused) if asks else None,
        refused_flags=sum(r.kind == "red_flag" for r in refused) if asks else None,
    )


def add_bertscore(records: Sequence[InterviewRecord], scorer: BertScorer) -> None:
    """Fills ``bertscore_f1`` of scoreable records in one batch (invalid predictions score 0)."""
    todo = [r for r in records if r.reference_usable and r.error is None and r.valid and r.prediction]
    for r, f in zip(
        todo, scorer.score([r.prediction for r in todo], [r.reference for r in todo]), strict=True
    ):
        r.bertscore_f1 = f
    for r in records:
        if r.reference_usable and r.error is None and (not r.valid or not r.prediction):
            r.bertscore_f1 = 0.0


def _mean(values: Sequence[float | None]) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def aggregate(records: Sequence[InterviewRecord]) -> dict[str, Any]:
    """Means over the records where each metric applies, with the counts behind them."""
    ok = [r for r in records if r.error is None]
    judged = [r for r in ok if r.n_judged]
    fid: dict[str, float] = {}
    total = sum(r.n_judged for r in judged)
    for r in judged:
        for k, v in r.fidelity.items():
            fid[k] = fid.get(k, 0.0) + v * r.n_judged / total
    return {
        "n": len(records),
        "errors": len(records) - len(ok),
        "invalid_rate": sum(not r.valid for r in ok) / len(ok) if ok else 0.0,
        "reference_usable": sum(r.reference_usable for r in ok),
        "rouge_l_f1": _mean([r.rouge_l for r in ok]),
        "bertscore_f1": _mean([r.bertscore_f1 for r in ok]),
        "turns_mean": _mean([r.n_turns for r in ok]),
        "blocked_rate": _mean([r.blocked_rate for r in ok]),
        "redundant_rate": _mean([r.redundant_rate for r in ok]),
        "repeat_rate_lexical": _mean([r.repeat_rate_lexical for r in ok]),
        "refused_slots_mean": _mean([r.refused_slots for r in ok]),
        "refused_flags_mean": _mean([r.refused_flags for r in ok]),
        "patient_answered": _mean([r.patient_answered for r in ok]),
        "red_flag_recall": _mean([r.red_flag_recall for r in ok]),
        "red_flag_n": sum(r.red_flag_recall is not None for r in ok),
        "differential_hit_rate": _mean(
            [float(r.differential_hit) for r in ok if r.differential_hit is not None]
        ),
        "differential_n": sum(r.differential_hit is not None for r in ok),
        "differential_top3_hit_rate": _mean(
            [float(r.differential_top3_hit) for r in ok if r.differential_top3_hit is not None]
        ),
        "n_facts_mean": _mean([r.n_facts for r in ok]),
        "elicited_fact_recall": _mean([r.elicited_fact_recall for r in ok]),
        "summary_fact_recall": _mean([r.summary_fact_recall for r in ok]),
        "summary_fact_precision": _mean([r.summary_fact_precision for r in ok]),
        "fidelity": fid,
        "fidelity_n": total,
    } | fidelity.summarise(r.fidelity_lexical for r in ok)
