"""Interview metrics (ROUGE-L, differential hit, red-flag recall, rates, aggregate), the patient simulator
and its fidelity judge, with scripted models."""

import asyncio
import json
import re
from typing import Any

import pytest

from medagent.config import InterviewEvalConfig, PatientKind
from medagent.history import HistoryTakingAgent, PatientSimulator
from medagent.history.evaluation.metrics import (
    RedFlagExtractor,
    add_bertscore,
    aggregate,
    differential_hit,
    interview_record,
    quote_supports,
    rouge_l,
)
from medagent.history.simulation.reference import extract_reference, visible_turns
from medagent.history.simulation.simulator import (
    DONT_KNOW,
    FidelityJudge,
    SimulatedExchange,
    fidelity_shares,
)
from medagent.interview.transcripts import parse_transcript
from medagent.llm.usage import UsageRecord
from tests.configs import history_agent_config
from tests.fakes import ScriptedChatModel, completion
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever, ScriptedPatient

IV = parse_transcript(
    "D: What brings you in?\nP: I've had a dry cough for a week.\nD: Any fever?\nP: Yes, 38.5 since Monday.\n"
    "D: Do you smoke?\nP: Half a pack a day.\nD: Any blood when you cough?\nP: A little blood this morning.\n"
    "D: Any questions for me?\nP: No.\n"
    "D: It sounds like a chest infection, so we will get a chest x-ray and start antibiotics today.\nP: OK.\n",
    "T1",
)


def _rouge_l_by_hand(prediction: str, reference: str) -> float:
    """The hand-written ROUGE-L that ``rouge_l`` replaced: LCS of lower-cased ``[a-z0-9]+`` tokens."""
    p, r = re.findall(r"[a-z0-9]+", prediction.lower()), re.findall(r"[a-z0-9]+", reference.lower())
    prev = [0] * (len(r) + 1)
    for x in p:
        cur = [0]
        for j, y in enumerate(r):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    lcs = prev[-1]
    return 2 * lcs / (len(p) + len(r)) if lcs else 0.0


ROUGE_FIXTURES = [
    ("a b c d", "a c d b"),
    ("the cat sat on the mat", "the cat is on the mat"),
    ("police killed the gunman", "the gunman police killed"),
    ("", "x"),
    ("a b", "c d"),
    ("Fever, COUGH!", "fever cough"),
    (
        "we will do a covid swab and you should isolate",
        "we'll take a swab and you should isolate for 14 days",
    ),
    ("most likely asthma; start an inhaler", "it is probably asthma, so we will start a puffer"),
    ("Swabs taken; isolating. Café-acquired?", "swab taken, isolate: cafe acquired"),
]


def test_rouge_l_equals_the_hand_written_lcs_on_the_fixtures() -> None:
    for pred, ref in ROUGE_FIXTURES:
        assert rouge_l(pred, ref) == pytest.approx(_rouge_l_by_hand(pred, ref)), (pred, ref)


def test_rouge_l_known_values() -> None:
    assert rouge_l("a b c d", "a c d b") == pytest.approx(3 / 4)  # LCS 3 of 4 tokens each side
    assert rouge_l("the cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)
    assert rouge_l("police killed the gunman", "the gunman police killed") == pytest.approx(0.5)
    assert rouge_l("", "x") == 0.0 and rouge_l("a b", "c d") == 0.0
    assert rouge_l("Fever, COUGH!", "fever cough") == 1.0


def test_rouge_l_matches_the_rouge_score_package() -> None:
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    pairs = [
        (
            "we will do a covid swab and you should isolate",
            "we'll take a swab and you should isolate for 14 days",
        ),
        ("most likely asthma; start an inhaler", "it is probably asthma, so we will start a puffer"),
    ]
    for pred, ref in pairs:
        assert rouge_l(pred, ref) == pytest.approx(scorer.score(ref, pred)["rougeL"].fmeasure)


def test_differential_hit() -> None:
    canon = {"copd": ["chronic obstructive airway disease"], "covid-19": ["covid-19 virus disease"]}
    lookup = lambda x: canon.get(x, [])  # noqa: E731
    gold = ["covid-19 virus disease"]
    assert differential_hit(["Asthma", "COVID-19"], gold, lookup)
    assert not differential_hit(["Asthma"], gold, lookup)
    assert differential_hit(["COPD"], ["chronic obstructive airway disease"], lookup)
    assert differential_hit(["acute chronic bronchitis"], ["chronic bronchitis"])  # containment
    assert not differential_hit([], gold)


def _fake_patient_llm(body: dict[str, Any]) -> dict[str, Any]:
    text = body["messages"][-1]["content"]
    question = text.rsplit("Doctor: ", 1)[-1]
    if "fever" in question.lower():
        return completion("Yes, 38.5 since Monday.")
    if "pets" in question.lower():
        return completion("")
    return completion("I have a dry cough.")


def test_simulator_answers_from_its_source_and_logs_context() -> None:
    ref = extract_reference(IV)
    llm = ScriptedChatModel(_fake_patient_llm)
    sim = PatientSimulator(
        llm, visible_turns(IV, ref), InterviewEvalConfig(simulator_exchanges=1), BagOfWordsEmbedder()
    )
    assert asyncio.run(sim.answer("Have you had a fever?")) == "Yes, 38.5 since Monday."
    assert asyncio.run(sim.answer("Do you have pets?")) == DONT_KNOW  # empty reply, recorded
    assert sim.calls.errors and len(sim.log) == 2
    ctx = sim.log[0].context
    assert ctx.startswith("Doctor: What brings you in?") and "38.5" in ctx and "smoke" not in ctx
    assert all("antibiotics" not in x.context for x in sim.log)  # the closing statement is hidden
    source = llm.requests[0]["messages"][-1]["content"]
    assert "<<<SOURCE>>>" in source and "antibiotics" not in source
    first_patient_turn = next(t.text for t in IV.turns if t.speaker == "patient")
    assert f'"{first_patient_turn}"' in source  # the presenting complaint is quoted on its own
    # Later requests carry the simulated exchanges so far.
    assert "Have you had a fever?" in llm.requests[1]["messages"][-1]["content"]
    with pytest.raises(ValueError, match="embedder"):
        PatientSimulator(llm, IV.turns, InterviewEvalConfig(simulator_exchanges=3))
    full = PatientSimulator(llm, visible_turns(IV, ref), InterviewEvalConfig(simulator_exchanges=None))
    assert "smoke" in full.context_for("fever?")


def test_fidelity_judge_labels_and_shares() -> None:
    replies = [completion('{"label": "supported", "rationale": "r"}'), completion("no json"),
               completion('{"label": "maybe"}'), completion('{"label": "beyond_source", "rationale": ""}')]  # fmt: skip
    judge = FidelityJudge(ScriptedChatModel(replies), InterviewEvalConfig())
    sim = PatientSimulator(
        ScriptedChatModel(_fake_patient_llm), IV.turns, InterviewEvalConfig(simulator_exchanges=None)
    )
    asyncio.run(sim.answer("Any fever?"))
    asyncio.run(sim.answer("Any pets?"))
    log = UsageRecord.calls(by_tag=True)
    labels = asyncio.run(judge.judge_all(sim.log, log))
    assert labels == ["supported", "invalid"]  # the second reply and its retry are both malformed
    assert any("no usable reply" in e for e in log.errors)
    assert fidelity_shares(["supported", "supported", "contradicts", "invalid"]) == {
        "supported": 0.5, "contradicts": 0.25, "beyond_source": 0.0, "invalid": 0.25,
    }  # fmt: skip
    assert fidelity_shares([]) == {}


def test_fidelity_judge_reads_the_lines_relevant_to_the_answer_not_the_simulators() -> None:
    cfg = InterviewEvalConfig(simulator_exchanges=1)
    seen = visible_turns(IV, extract_reference(IV))
    # The simulator was shown the fever exchange but answered about smoking: the judge must see the
    # smoking exchange to find the answer contradicting it.
    exchange = SimulatedExchange(
        "Any fever?", "I never smoke.", context="D: Any fever?\nP: Yes, 38.5 since Monday."
    )
    judge = FidelityJudge(ScriptedChatModel([]), cfg, source=seen, embedder=BagOfWordsEmbedder())
    context = judge.context_for(exchange)
    assert "Half a pack a day" in context and "dry cough" in context  # + the presenting complaint
    assert FidelityJudge(ScriptedChatModel([]), cfg).context_for(exchange) == exchange.context


def test_fidelity_judge_invalid_after_retries() -> None:
    judge = FidelityJudge(ScriptedChatModel([completion("x"), completion("y")]), InterviewEvalConfig())
    sim = PatientSimulator(
        ScriptedChatModel(_fake_patient_llm), IV.turns, InterviewEvalConfig(simulator_exchanges=None)
    )
    asyncio.run(sim.answer("Any fever?"))
    assert asyncio.run(judge.judge(sim.log[0], UsageRecord.calls(by_tag=True))) == "invalid"


def test_red_flag_extractor_keeps_flags_the_patient_affirms_in_their_own_words() -> None:
    replies = [
        # invented id; a doctor's words; a denied symptom; then the patient's own affirmed words
        completion(
            '{"red_flags": [{"id": "invented", "quote": "a dry cough"}, '
            '{"id": "haemoptysis", "quote": "Any blood when you cough"}, '
            '{"id": "weight_loss", "quote": "lost weight"}]}'
        ),
        completion('{"red_flags": [{"id": "haemoptysis", "quote": "A little blood this morning"}]}'),
    ]
    cfg = InterviewEvalConfig(red_flag_chunk_tokens=40)
    llm = ScriptedChatModel(lambda body: replies[min(len(llm.requests) - 1, 1)])
    ext = RedFlagExtractor(llm, history_agent_config().red_flags, cfg)
    log = UsageRecord.calls(by_tag=True)
    assert asyncio.run(ext.extract(IV, log)) == ["haemoptysis"]
    assert len(llm.requests) > 1  # chunked
    assert "haemoptysis: coughing up blood" in llm.requests[0]["messages"][0]["content"]
    dropped = [e for e in log.errors if "dropped" in e]
    assert any("'Any blood when you cough'" in e for e in dropped) and any(
        "weight_loss" in e for e in dropped
    )


@pytest.mark.parametrize(
    ("quote", "ok"),
    [
        ("A little blood this morning", True),
        ("little blood", True),  # any contiguous run of the patient's words, case and punctuation aside
        ("blood", False),  # one word is not evidence
        ("Any blood when you cough", False),  # the doctor's words
        ("blood in my phlegm", False),  # not said
        ("no blood", False),  # a negated quote
        ("coughing up blood", False),  # said, but denied: "I'm not coughing up blood"
        ("maybe some night sweats", False),  # uncertain
    ],
)
def test_quote_supports(quote: str, ok: bool) -> None:
    patient = [
        "A little blood this morning.",
        "No, I'm not coughing up blood now.",
        "Maybe some night sweats.",
    ]
    assert quote_supports(quote, patient) is ok


class _FakeBert:
    def score(self, preds: list[str], refs: list[str]) -> list[float]:
        return [0.5 for _ in preds]


def test_interview_record_and_aggregate() -> None:
    ref = extract_reference(IV)
    agent = HistoryTakingAgent(
        FakeClinician().model, history_agent_config(max_turns=4), FakeRetriever(), BagOfWordsEmbedder()
    )
    patient = ScriptedPatient(opening="A cough, and I coughed up blood.")
    result = asyncio.run(agent.run(patient))
    rec = interview_record(
        IV, result, ref, embedder=BagOfWordsEmbedder(), reference_red_flags=["haemoptysis", "weight_loss"],
        gold_diagnoses=["covid-19 virus disease"], canonical=lambda x: ["covid-19 virus disease"] if "covid" in x else [],
        fidelity_labels=["supported", "beyond_source"],
    )  # fmt: skip
    assert rec.red_flag_recall == 0.5 and rec.differential_hit is True
    assert rec.rouge_l is not None and 0 < rec.rouge_l < 1 and rec.redundant_rate == 0.0
    assert rec.fidelity["supported"] == 0.5 and rec.n_turns == result.n_turns
    bad = interview_record(IV, result, ref)
    bad.valid, bad.prediction = False, ""
    errored = interview_record(IV, result, ref)
    errored.error = "LLMError: 503"
    records = [rec, bad, errored]
    add_bertscore(records, _FakeBert())  # type: ignore[arg-type]
    assert rec.bertscore_f1 == 0.5 and bad.bertscore_f1 == 0.0 and errored.bertscore_f1 is None
    agg = aggregate(records)
    assert agg["n"] == 3 and agg["errors"] == 1 and agg["invalid_rate"] == 0.5
    assert agg["bertscore_f1"] == 0.25 and agg["red_flag_n"] == 1 and agg["differential_n"] == 1
    assert agg["fidelity"] == {"supported": 0.5, "contradicts": 0.0, "beyond_source": 0.5, "invalid": 0.0}
    json.dumps(agg)
    json.dumps(rec.to_dict())


def test_the_record_counts_what_grounding_refused_and_a_stateless_arm_has_no_count() -> None:
    from dataclasses import replace

    from medagent.history.agent.state import Refusal

    ref = extract_reference(IV)
    agent = HistoryTakingAgent(
        FakeClinician().model, history_agent_config(max_turns=2), FakeRetriever(), BagOfWordsEmbedder()
    )
    result = asyncio.run(agent.run(ScriptedPatient(opening="A cough.")))
    refused = (
        Refusal("slot", "onset", "none", "I'm not sure", "the patient was unsure", 1),
        Refusal(
            "red_flag", "haemoptysis", "haemoptysis", "I have a cough", "the quote does not express it", 1
        ),
        Refusal("slot", "severity", "moderate", "", "no quote", 2),
    )
    result = replace(result, final_state=replace(result.final_state, refused=refused))
    rec = interview_record(IV, result, ref)
    assert (rec.refused_slots, rec.refused_flags) == (2, 1)
    stateless = interview_record(IV, replace(result, mode="single_shot"), ref)
    assert (stateless.refused_slots, stateless.refused_flags) == (None, None)
    assert aggregate([rec, stateless])["refused_slots_mean"] == 2.0


FACT_ITEMS = [
    {"category": "symptom", "statement": "dry cough for a week", "polarity": "present", "quote": "dry cough for a week"},
    {"category": "symptom", "statement": "coughed up blood", "polarity": "present", "quote": "A little blood this morning"},
    {"category": "symptom", "statement": "night sweats", "polarity": "present", "quote": "soaked with sweat"},
]  # fmt: skip


def _evaluator_llm(body: dict[str, Any]) -> dict[str, Any]:
    name = body.get("prompt")
    if name == "history_fidelity":
        return completion('{"label": "supported", "rationale": "in the source"}')
    if name == "history_red_flags":
        return completion('{"red_flags": [{"id": "haemoptysis", "quote": "a little blood this morning"}]}')
    if name == "history_facts":
        return completion(json.dumps({"facts": FACT_ITEMS}))
    assert name == "history_patient", name
    return completion(
        "A little blood this morning." if "blood" in json.dumps(body) else "I have a dry cough."
    )


@pytest.mark.parametrize("mode", ["amq", "single_shot"])
def test_evaluate_interview_row(mode: str) -> None:
    from medagent.history import build_history_agent
    from medagent.history.evaluation.runner import evaluate_interview

    agent = build_history_agent(
        history_agent_config(mode=mode, max_turns=3),
        FakeClinician().model,
        FakeRetriever(),
        BagOfWordsEmbedder(),
    )
    llm = ScriptedChatModel(_evaluator_llm)
    cfg = InterviewEvalConfig(simulator_exchanges=2, patient=PatientKind.simulator)
    row = asyncio.run(
        evaluate_interview(IV, agent, llm, cfg, embedder=BagOfWordsEmbedder(), gold_diagnoses=["covid-19"])
    ).to_dict()
    json.dumps(row)
    rec = row["record"]
    assert rec["reference_usable"] and rec["rouge_l"] is not None and rec["differential_hit"] is True
    # Two facts rest on the patient's words; the third's quote is in no patient turn (set aside).
    assert rec["n_facts"] == 2 and rec["patient"] == "simulator"
    assert rec["summary_fact_recall"] is not None and 0 <= rec["elicited_fact_recall"] <= 1
    if mode == "amq":
        assert rec["red_flags_reference"] == ["haemoptysis"]
        assert rec["n_turns"] == 3 and rec["fidelity"]["supported"] == 1.0 and len(row["simulator"]) == 3
        assert rec["red_flag_recall"] in (0.0, 1.0)
        assert rec["patient_answered"] == 1.0  # this simulator always answers
    else:
        assert rec["patient_answered"] is None  # no question after the opening
        # The baseline (context=opening) asked the simulated patient the opening question, nothing more.
        assert rec["n_turns"] == 1 and len(row["simulator"]) == 1 and rec["red_flag_recall"] is None
        # Recall is not scored here, so the reference flags are not extracted (no "red flags" call).
        assert rec["red_flags_reference"] is None and "red flags" not in row["eval_usage"]["by_tag"]
        # It never read the physician's closing statement.
        assert not any("antibiotics" in json.dumps(r) for r in agent.llm.requests)  # type: ignore[union-attr]
    skipped = asyncio.run(
        evaluate_interview(
            parse_transcript("D: Do you smoke?\nP: No.\n", "T9"), agent, llm, cfg, embedder=None
        )
    ).to_dict()
    assert skipped["skipped"] and "record" not in skipped


def test_evaluate_interview_with_the_replay_patient() -> None:
    from medagent.history import build_history_agent
    from medagent.history.evaluation.runner import evaluate_interview

    agent = build_history_agent(
        history_agent_config(mode="amq", max_turns=3),
        FakeClinician().model,
        FakeRetriever(),
        BagOfWordsEmbedder(),
    )
    llm = ScriptedChatModel(_evaluator_llm)
    row = asyncio.run(
        evaluate_interview(
            IV, agent, llm, InterviewEvalConfig(patient=PatientKind.replay), embedder=BagOfWordsEmbedder()
        )
    ).to_dict()
    # The replay patient made no model call; its answers are the patient's turns or its "I don't know".
    assert not any(r.get("prompt") == "history_patient" for r in llm.requests)
    patient_lines = {t.text for t in IV.turns if t.speaker == "patient"}
    assert all(x["answer"] in patient_lines or x["answer"] == "I don't know." for x in row["simulator"])
    assert row["record"]["patient"] == "replay" and row["record"]["fidelity"] == {}
    # The record counts the answers after the opening: what elicited facts could come from.
    later = [x["answer"] for x in row["simulator"][1:]]
    assert len(later) >= 1
    answered = sum(a != "I don't know." for a in later) / len(later)
    assert row["record"]["patient_answered"] == pytest.approx(answered)
