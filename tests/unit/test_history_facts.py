"""The case's facts, the replay and fact patients, the fact endpoints, the patient validation and the
instrument check (scripted fake model, bag-of-words embedder)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from medagent.history.evaluation.facts_metrics import FactMatcher, fact_scores, is_no_answer
from medagent.history.evaluation.instrument import OPENING, ORACLE, instrument_check
from medagent.history.evaluation.patient_validation import (
    CachedEmbedder,
    choose_threshold,
    probes,
    run_probes,
    sentence_units,
    summarise,
)
from medagent.history.evaluation.record import InterviewRecord
from medagent.history.facts.extract import excerpts, extract_facts, prompt_id
from medagent.history.facts.store import FactCache, FactSet, cache_key, find_quote
from medagent.history.simulation.fact_patient import FactPatient
from medagent.history.simulation.replay import NO_ANSWER, ReplayPatient, transcript_exchanges
from medagent.interview.transcripts import parse_transcript
from tests.fakes import ScriptedChatModel, completion
from tests.unit._history_fakes import BagOfWordsEmbedder

IV = parse_transcript(
    "D: What brings you in today?\nP: I've had a dry cough for a week.\nD: Any fever?\nP: Yes, 38.5 since Monday.\n"
    "D: Do you smoke?\nP: Half a pack a day.\nD: Any blood when you cough?\nP: No blood, no.\n",
    "T1",
)
ITEMS = [
    {"category": "symptom", "statement": "dry cough for a week", "polarity": "present", "quote": "dry cough for a week"},
    {"category": "symptom", "statement": "fever 38.5 since Monday", "polarity": "present", "quote": "38.5 since  MONDAY"},
    {"category": "social", "statement": "smokes half a pack a day", "polarity": "present", "quote": "Half a pack a day"},
    {"category": "symptom", "statement": "night sweats", "polarity": "present", "quote": "soaked with sweat"},
    {"category": "symptom", "statement": "cough", "polarity": "sometimes", "quote": "dry cough"},
    {"category": "social", "statement": "asks about smoking", "polarity": "present", "quote": "Do you smoke?"},
]  # fmt: skip


def _facts_llm(body: dict[str, Any]) -> dict[str, Any]:
    assert body["prompt"] == "history_facts" and body["response_format"] is not None
    return completion(json.dumps({"facts": ITEMS}))


def test_find_quote_only_in_patient_turns() -> None:
    assert find_quote("DRY cough  for a week", IV.turns) == 1
    assert find_quote("Do you smoke?", IV.turns) is None  # the doctor's words
    assert find_quote('"..."', IV.turns) is None


def test_extraction_keeps_quoted_facts_sets_aside_the_rest_and_caches(tmp_path: Any) -> None:
    llm = ScriptedChatModel(_facts_llm)
    cache = FactCache(tmp_path)
    fs = asyncio.run(extract_facts(llm, "T1", IV.turns, model="m", chunk_chars=10_000, cache=cache))
    assert [f.statement for f in fs.facts] == [
        "dry cough for a week", "fever 38.5 since Monday", "smokes half a pack a day"
    ]  # fmt: skip
    assert [f.turn for f in fs.facts] == [1, 3, 5]
    reasons = sorted(x["reason"] for x in fs.set_aside)
    assert reasons == [
        "quote not in any patient turn",
        "quote not in any patient turn",
        "unknown polarity 'sometimes'",
    ]
    n = len(llm.requests)
    again = asyncio.run(extract_facts(llm, "T1", IV.turns, model="m", chunk_chars=10_000, cache=cache))
    assert len(llm.requests) == n and again == fs  # read from the cache, no model call
    # Another model or transcript is another key.
    assert cache_key(IV.turns, "m2", "p@v1") != cache_key(IV.turns, "m", "p@v1")
    assert cache_key(IV.turns[:-1], "m", "p@v1") != cache_key(IV.turns, "m", "p@v1")


class _Slow(ScriptedChatModel):
    """Yields to the event loop before each reply, so two extractions overlap as two arms' would."""

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return await super().complete(body)


def test_two_arms_extracting_one_interview_at_once_pay_once_and_share_an_error(tmp_path: Any) -> None:
    from medagent.llm.base import LLMError

    async def both(model: Any, cache: FactCache) -> list[Any]:
        calls = [
            extract_facts(model, "T1", IV.turns, model="m", chunk_chars=10_000, cache=cache) for _ in range(2)
        ]
        return await asyncio.gather(*calls, return_exceptions=True)

    llm = _Slow(_facts_llm)
    first, second = asyncio.run(both(llm, FactCache(tmp_path / "ok")))
    assert first == second and first.facts and len(llm.requests) == 1
    failing = _Slow([LLMError("503")])  # one call: the second arm waits for the first's outcome
    errors = asyncio.run(both(failing, FactCache(tmp_path / "failing")))
    assert [type(e) for e in errors] == [LLMError, LLMError] and len(failing.requests) == 1
    assert not list((tmp_path / "failing").glob("*.json"))  # nothing cached after an error


def test_a_cancelled_caller_leaves_the_other_arm_its_extraction(tmp_path: Any) -> None:
    llm = _Slow(_facts_llm)

    async def go() -> Any:
        cache = FactCache(tmp_path)
        first = asyncio.ensure_future(
            extract_facts(llm, "T1", IV.turns, model="m", chunk_chars=10_000, cache=cache)
        )
        second = asyncio.ensure_future(
            extract_facts(llm, "T1", IV.turns, model="m", chunk_chars=10_000, cache=cache)
        )
        await asyncio.sleep(0)
        first.cancel()
        return await second, first

    fs, first = asyncio.run(go())
    assert first.cancelled() and fs.facts and len(llm.requests) == 1


def test_a_worker_in_another_process_waits_for_the_set_being_written_and_reads_it(tmp_path: Any) -> None:
    import fcntl

    cache = FactCache(tmp_path)
    key = cache_key(IV.turns, "m", prompt_id())
    target = cache.path("T1", key)
    llm = ScriptedChatModel(_facts_llm)

    async def go() -> Any:
        with open(target.with_name(target.name + ".lock"), "a") as held:  # the other process's lock
            fcntl.flock(held.fileno(), fcntl.LOCK_EX)
            waiting = asyncio.ensure_future(
                extract_facts(llm, "T1", IV.turns, model="m", chunk_chars=10_000, cache=cache)
            )
            await asyncio.sleep(0.1)
            assert not waiting.done()
            written = FactSet("T1", key, "m", prompt_id())  # what the other process extracted
            cache.put(written)
            fcntl.flock(held.fileno(), fcntl.LOCK_UN)
        return await waiting, written

    got, written = asyncio.run(go())
    assert got == written and llm.requests == []
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json", ".lock"]  # no temporary file left


def test_a_reply_cut_at_its_token_cap_then_an_empty_retry_is_recorded_not_silent() -> None:
    replies = iter(
        [
            completion('{"facts": [' + json.dumps(ITEMS[0]) + ", " + json.dumps(ITEMS[0])[:30]),
            completion('{"facts": []}'),
        ]
    )
    llm = ScriptedChatModel(lambda body: next(replies))
    fs = asyncio.run(extract_facts(llm, "T1", IV.turns, model="m", chunk_chars=10_000))
    assert fs.facts == [] and len(fs.errors) == 1
    assert fs.errors[0].startswith("excerpt 0: retried (0 facts after): ")


def test_excerpts_keep_whole_exchanges() -> None:
    parts = excerpts(IV.turns, 80)
    assert len(parts) > 1 and all(p.startswith("Doctor:") for p in parts)
    assert "\n".join(parts).count("Patient:") == 4


def test_excerpts_are_asked_at_once_up_to_the_bound_and_read_in_order() -> None:
    inside, most = 0, 0

    def by_excerpt(body: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(body["messages"])
        return completion(json.dumps({"facts": [i for i in ITEMS[:3] if i["quote"].split()[0] in text]}))

    class Counting(ScriptedChatModel):
        async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
            nonlocal inside, most
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.01)
            inside -= 1
            return await super().complete(body)

    parts = len(excerpts(IV.turns, 80))
    fs = asyncio.run(
        extract_facts(Counting(by_excerpt), "T1", IV.turns, model="m", chunk_chars=80, concurrency=2)
    )
    assert parts > 2 and most == 2
    most = 0
    sequential = asyncio.run(
        extract_facts(Counting(by_excerpt), "T1", IV.turns, model="m", chunk_chars=80, concurrency=1)
    )
    assert most == 1 and fs == sequential and [f.turn for f in fs.facts] == [1, 3, 5]


def test_replay_patient_answers_verbatim_or_says_it_does_not_know() -> None:
    p = ReplayPatient(IV.turns, BagOfWordsEmbedder(), threshold=0.5)
    assert asyncio.run(p.answer("Do you have a fever at all?")) == "Yes, 38.5 since Monday."
    assert asyncio.run(p.answer("Any allergies to medication?")) == NO_ANSWER
    assert p.log[0].source_turns == (3,) and p.log[1].source_turns == ()
    assert [x.index for x in transcript_exchanges(IV.turns)] == [0, 1, 2, 3]


def test_fact_patient_sees_only_retrieved_facts() -> None:
    fs = asyncio.run(
        extract_facts(ScriptedChatModel(_facts_llm), "T1", IV.turns, model="m", chunk_chars=10_000)
    )
    llm = ScriptedChatModel([completion("Patient: Half a pack a day.")])
    p = FactPatient(llm, fs, BagOfWordsEmbedder(), k=1)
    assert asyncio.run(p.answer("Do you smoke? How much a day?")) == "Half a pack a day."
    sent = llm.requests[0]["messages"][-1]["content"]
    assert "smokes half a pack a day" in sent and "dry cough" not in sent and "Doctor:" in sent


def test_fact_endpoints() -> None:
    fs = asyncio.run(
        extract_facts(ScriptedChatModel(_facts_llm), "T1", IV.turns, model="m", chunk_chars=10_000)
    )
    m = FactMatcher(BagOfWordsEmbedder(), threshold=0.7)
    s = fact_scores(
        fs.facts, ["I've had a dry cough for a week.", NO_ANSWER], "Dry cough for a week. Has asthma.", m
    )
    assert s.n_facts == 3 and s.elicited_fact_recall == pytest.approx(1 / 3)
    assert s.summary_fact_recall == pytest.approx(1 / 3) and s.summary_fact_precision == 0.5
    oracle = fact_scores(fs.facts, None, "", m)
    assert oracle.elicited_fact_recall == 1.0 and oracle.summary_fact_recall == 0.0
    assert (
        is_no_answer("I'm not sure.")
        and is_no_answer(NO_ANSWER)
        and not is_no_answer("I don't know, maybe a week")
    )


def test_validation_of_the_replay_patient() -> None:
    emb = CachedEmbedder(BagOfWordsEmbedder())
    units = sentence_units("T1", IV.turns)
    ps = probes("T1", IV.turns, "own")
    p = ReplayPatient(IV.turns, emb, threshold=0.5)
    res = asyncio.run(run_probes(p.answer, ps, units, IV.turns, FactMatcher(emb, 0.7)))
    row = summarise("replay", "own", "sentences", res)
    assert row.probes == 4 and row.disclosed == 1.0 and row.false_not_sure == 0.0 and row.invented == 0.0
    # A patient that always says it does not know: every answerable probe is a false "not sure".
    res = asyncio.run(run_probes(_no, ps, units, IV.turns, FactMatcher(emb, 0.7)))
    row = summarise("mute", "own", "sentences", res)
    assert row.false_not_sure == 1.0 and row.disclosed == 0.0 and row.supported == 0.0
    # One that invents: its clause is neither the patient's words nor a unit of the case.
    res = asyncio.run(run_probes(_invent, ps[:1], units, IV.turns, FactMatcher(emb, 0.7)))
    assert summarise("x", "own", "sentences", res).invented == 1.0
    other = probes(
        "T1", IV.turns, "other", pool=[("T2", "Are you a smoker?"), ("T1", "Do you smoke?")], embedder=emb
    )
    assert {q.question for q in other} == {"Are you a smoker?"}


async def _no(q: str) -> str:
    return NO_ANSWER


async def _invent(q: str) -> str:
    return "My grandfather had tuberculosis in Peru."


def test_choose_threshold_answers_when_right_beats_wrong() -> None:
    sims = [0.9, 0.85, 0.5, 0.45, 0.42]
    correct = [True, True, False, False, True]
    assert choose_threshold(sims, correct, grid=[0.4, 0.5, 0.8]) == (0.8, 2)


def _rec(i: str, v: float | None) -> InterviewRecord:
    return InterviewRecord(
        i, "fareez", "single_shot", "", "", True, True, 1, 1, 0, 0.0, 0.0, "", summary_fact_recall=v
    )


def test_instrument_check_passes_fails_and_says_why() -> None:
    ids = [f"I{k}" for k in range(8)]
    good = instrument_check([(OPENING, [_rec(i, 0.1) for i in ids]), (ORACLE, [_rec(i, 0.6 + 0.01 * k) for k, i in enumerate(ids)])], n_boot=500)  # fmt: skip
    assert good.passed and "excludes 0" in good.markdown()
    flat = instrument_check([(OPENING, [_rec(i, 0.3 + 0.02 * (k % 2)) for k, i in enumerate(ids)]), (ORACLE, [_rec(i, 0.31) for i in ids])], n_boot=500)  # fmt: skip
    assert not flat.passed and flat.markdown().startswith("> **The instrument check failed")
    missing = instrument_check([(OPENING, [_rec(i, 0.1) for i in ids])])
    assert not missing.passed and ORACLE in missing.reason


def test_old_records_load() -> None:
    old = {
        k: v
        for k, v in _rec("I1", None).to_dict().items()
        if k not in ("summary_fact_recall", "n_facts", "patient")
    }
    assert InterviewRecord.from_dict(old | {"unknown_key": 1}).summary_fact_recall is None


def test_meditod_units_rest_on_the_mapped_turn_and_crosscheck() -> None:
    from medagent.history.facts.annotations import crosscheck, meditod_units

    utterances = [
        {"speaker": "doctor", "text": "Any fever?"},
        {"speaker": "patient", "text": "Yes, 38.5 since Monday.",
         "nlu": [{"intent": "inform", "slots": {"positive_symptom": [{"value": "fever", "onset": "Monday"}]}}]},
        {"speaker": "patient", "text": "No blood, no.",
         "nlu": [{"intent": "inform", "slots": {"negative_symptom": [{"value": "hemoptysis"}]}}]},
        {"speaker": "patient", "text": "Something never said here.",
         "nlu": [{"intent": "inform", "slots": {"positive_symptom": [{"value": "rash"}]}}]},
    ]  # fmt: skip
    units, unmapped = meditod_units(utterances, "T1", IV.turns)
    assert unmapped == 1
    assert [(u.statement, u.polarity, u.turn) for u in units.facts] == [
        ("fever", "present", 3), ("fever onset: Monday", "present", 3), ("no hemoptysis", "absent", 7)
    ]  # fmt: skip
    fs = asyncio.run(
        extract_facts(ScriptedChatModel(_facts_llm), "T1", IV.turns, model="m", chunk_chars=10_000)
    )
    check = crosscheck(fs, units, FactMatcher(BagOfWordsEmbedder(), 0.3))
    assert check["annotated_units"] == 3 and check["stated_by_extracted"] == 2


def test_agents_questions_posed_to_a_patient_without_gold(tmp_path: Any) -> None:
    from medagent.history.evaluation.patient_validation import summarise_asked
    from medagent.history.evaluation.replay_validation import asked_probes

    arm = tmp_path / "amq"
    arm.mkdir()
    rows = [
        {"interview_id": "T1", "simulator": [{"question": "What brings you in?"}, {"question": "Any fever?"},
                                             {"question": "Where did you travel?"}]},
        {"interview_id": "T9", "simulator": [{"question": "Hello?"}, {"question": "Any rash?"}]},
    ]  # fmt: skip
    (arm / "interviews.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ps = asked_probes([arm], ["T1"])
    # The opening is every arm's and is left out; other interviews' questions are not posed.
    assert [(p.interview_id, p.exchange, p.question, p.gold_turns) for p in ps] == [
        ("T1", 1, "Any fever?", ()),
        ("T1", 2, "Where did you travel?", ()),
    ]
    emb = CachedEmbedder(BagOfWordsEmbedder())
    units = sentence_units("T1", IV.turns)
    replay = ReplayPatient(IV.turns, emb, threshold=0.5)
    res = asyncio.run(run_probes(replay.answer, ps, units, IV.turns, FactMatcher(emb, 0.7)))
    row = summarise_asked("replay", res)
    # The fever question is the transcript's; travel is in no exchange, so the replay says it does not know.
    assert (row.questions, row.answered, row.answered_supported, row.invented) == (2, 0.5, 0.5, 0.0)
    res = asyncio.run(run_probes(_invent, ps, units, IV.turns, FactMatcher(emb, 0.7)))
    row = summarise_asked("inventor", res)
    assert row.answered == 1.0 and row.answered_supported == 0.0 and row.invented == 1.0


def test_agents_questions_answered_share_keys_clashing_arm_names_by_run(
    tmp_path: Any, monkeypatch: Any
) -> None:
    from medagent.history.evaluation import replay_validation as rv

    monkeypatch.setattr(rv, "load_transcripts", lambda kind, root, ids: ([IV], []))
    dirs = []
    for run in ("run_a", "run_b"):
        arm = tmp_path / run / "arms" / "amq"
        arm.mkdir(parents=True)
        row = {"interview_id": "T1", "simulator": [{"question": "Hi?"}, {"question": "Do you smoke?"}]}
        (arm / "interviews.jsonl").write_text(json.dumps(row) + "\n")
        dirs.append(arm)
    out = rv.asked_by_agents(dirs, CachedEmbedder(BagOfWordsEmbedder()), 0.5, "exchange", None)
    assert set(out) == {"run_a/amq", "run_b/amq"}
    assert out["run_a/amq"]["questions"] == 1 and out["run_a/amq"]["answered"] == 1.0
    assert set(rv.asked_by_agents(dirs[:1], CachedEmbedder(BagOfWordsEmbedder()), 0.5, "exchange", None)) == {
        "amq"
    }
