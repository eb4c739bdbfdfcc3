"""The physician's closing statement, extracted from real OSCE transcripts and MediTOD dialogues."""

from pathlib import Path

import pytest

from medagent.history.simulation.reference import (
    ClosingRule,
    classify_doctor_turn,
    exchanges,
    extract_reference,
    visible_turns,
)
from medagent.interview.meditod import load_meditod
from medagent.interview.transcripts import load_transcripts, parse_transcript


def test_classify_doctor_turns() -> None:
    rule = ClosingRule()
    assert classify_doctor_turn("OK, and do you smoke?", rule) == "question"
    assert classify_doctor_turn("Did you have any questions of your own for me?", rule) == "other"
    plan = "So it sounds like a viral infection, we will do a covid swab today and you should isolate until the result."
    assert classify_doctor_turn(plan, rule) == "closing"
    assert classify_doctor_turn("OK, thank you.", rule) == "other"


def test_synthetic_interview() -> None:
    iv = parse_transcript(
        "D: What brings you in?\nP: A cough.\nD: Do you smoke?\nP: No.\n"
        "D: OK, those were all the questions I had. Any questions for me?\nP: What could it be?\n"
        "D: It sounds like a viral infection, so we will do a swab today and you should rest and drink fluids.\n"
        "P: OK.\nD: Great, thank you.\nP: Thanks.\n",
        "T1",
    )
    ref = extract_reference(iv)
    assert ref.turns == (6,) and ref.usable and ref.statement.startswith("It sounds like")
    assert ref.visible_until == 6
    seen = visible_turns(iv, ref)
    assert len(seen) == 6 and all("swab" not in t.text for t in seen)
    assert exchanges(seen)[0] == "Doctor: What brings you in?\nPatient: A cough."
    none = extract_reference(parse_transcript("D: Do you smoke?\nP: No.\n", "T2"))
    assert not none.usable and none.statement == "" and none.visible_until == 2


def test_real_transcripts(data_root: Path) -> None:
    interviews, _ = load_transcripts(None, data_root)
    refs = {iv.id: extract_reference(iv) for iv in interviews}
    # The count the module docstring reports.
    assert sum(r.usable for r in refs.values()) == 247 and len(refs) == 272
    by_id = {iv.id: iv for iv in interviews}
    r = refs["RES0199"]
    assert "covid" in r.statement.lower() and "isolate" in r.statement.lower()
    assert all("isolate for 14 days" not in t.text for t in visible_turns(by_id["RES0199"], r))
    assert "Patellofemoral" in refs["MSK0021"].statement
    assert len(refs["RES0176"].turns) == 2  # summary turn + plan turn
    assert not refs["CAR0001"].usable  # ends on history questions and a goodbye


@pytest.mark.parametrize("dialog", ["115", "317", "407"])
def test_meditod_dialogues_have_usable_statements(data_root: Path, dialog: str) -> None:
    (iv,) = [iv for iv, _gold in load_meditod(data_root) if iv.id == dialog]
    ref = extract_reference(iv)
    assert ref.usable and ref.visible_until < len(iv.turns)
    assert ref.to_dict()["turns"] == list(ref.turns)
