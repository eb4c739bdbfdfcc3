"""Parsing Fareez transcripts and reading the MediTOD sample (text apart from gold labels)."""

from pathlib import Path

import pytest

from medagent.interview.meditod import FAREEZ_IDS, gold_annotation, load_meditod, load_ontology
from medagent.interview.sources import list_interview_sources, load_interviews
from medagent.interview.transcripts import (
    Interview,
    decode_transcript,
    list_interviews,
    load_transcripts,
    parse_transcript,
    read_transcript,
)


def test_turns_multiline_utterances_and_crlf() -> None:
    text = "D: What brings you in?\r\n\r\nP: A cough\r\nthat will not stop.\r\n\r\nD: OK.\r\n"
    iv = parse_transcript(text, "X1")
    assert [(t.index, t.speaker, t.text) for t in iv.turns] == [
        (0, "doctor", "What brings you in?"),
        (1, "patient", "A cough that will not stop."),
        (2, "doctor", "OK."),
    ]
    assert iv.issues == ("line 4: continuation line joined to the turn opened on line 3",)


def test_odd_lines_are_recorded_not_fatal() -> None:
    text = "preamble\nD; Any fever?\nP No.\nDL OK, uh. And any allergies?\nP:\nD: \nP. Yes.\nand pollen"
    iv = parse_transcript(text)
    assert [(t.index, t.speaker, t.text) for t in iv.turns] == [
        (0, "doctor", "Any fever?"),
        (1, "patient", "No."),
        (2, "doctor", "OK, uh. And any allergies?"),
        (3, "patient", "Yes. and pollen"),
    ]
    joined = " | ".join(iv.issues)
    assert "line 1: text before the first speaker line dropped" in joined
    for prefix in ("D;", "P", "DL", "P."):
        assert f"nonstandard speaker prefix {prefix!r}" in joined
    assert "line 5: empty patient turn dropped" in joined and "line 6: empty doctor turn dropped" in joined
    assert "line 8: continuation line joined to the turn opened on line 7" in joined


def test_utf16_bom_and_bad_bytes_decode() -> None:
    assert decode_transcript("D: Hi\n".encode("utf-16")) == ("D: Hi\n", [])
    assert decode_transcript(b"\xef\xbb\xbfD: Hi") == ("D: Hi", [])
    text, issues = decode_transcript(b"D: caf\xe9")
    assert text == "D: caf\ufffd" and issues and "replaced" in issues[0]


def test_interview_json_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "RES9999.txt"
    path.write_bytes("D: Any cough?\n\nP: No.\n".encode("utf-16"))
    iv = read_transcript(path)
    assert iv.id == "RES9999" and iv.source == "fareez" and len(iv.turns) == 2
    assert Interview.from_json(iv.to_json()) == iv


def test_listing_by_prefix_on_real_data(data_root: Path) -> None:
    res = list_interviews("RES", data_root)
    assert len(res) == 213 and all(p.stem.startswith("RES") for p in res)
    assert len(list_interviews("msk", data_root)) == 46
    interviews, files = load_transcripts("RES", data_root, limit=2)
    assert [iv.id for iv in interviews] == ["RES0001", "RES0002"] and len(files) == 2
    assert interviews[1].turns  # RES0002 is UTF-16 with a BOM
    with pytest.raises(FileNotFoundError, match="RES0040"):
        load_transcripts("RES", data_root, ids=["RES0040"])  # absent from the release


def test_meditod_text_matches_its_transcript(data_root: Path) -> None:
    pairs = load_meditod(data_root)
    assert [iv.id for iv, _ in pairs] == ["115", "317", "407"]
    for iv, _ in pairs:
        [res], _ = load_transcripts(ids=[FAREEZ_IDS[iv.id]], data_root=data_root)
        assert len(res.turns) == len(iv.turns) + 1  # the transcript has one extra closing turn
        pairs = zip(iv.turns, res.turns[: len(iv.turns)], strict=True)
        assert all(a.speaker == b.speaker and a.text.strip() == b.text.strip() for a, b in pairs)


def test_gold_conventions_on_real_sample(data_root: Path) -> None:
    golds = {g.interview_id: g for _, g in load_meditod(data_root)}
    g = golds["115"]
    assert g.annotator == "gold" and g.diagnoses == ["chronic bronchitis"]
    assert g.positive_findings == ["coughing", "dyspnea", "colored/excess sputum", "wheezing"]
    assert "hemoptysis" in g.negative_findings and len(g.questions) == 48
    assert [len(golds[k].questions) for k in ("317", "407")] == [51, 59]
    assert golds["407"].diagnoses == ["seborrheic keratosis", "chronic obstructive airway disease"]


def test_gold_annotation_last_state_and_first_category() -> None:
    utterances = [
        {
            "speaker": "doctor",
            "text": "Any cough or work exposures?",
            "actions": [
                {"action": "inquire", "occupation": [{"value": "miner"}]},
                {"action": "inquire", "symptom": [{"value": "coughing"}]},
            ],
        },
        {
            "speaker": "patient",
            "text": "No cough.",
            "dialog_state": {"negative_symptom": [{"value": "coughing"}]},
        },
        {
            "speaker": "doctor",
            "text": "Sounds like asthma.",
            "actions": [
                {"action": "diagnosis", "disease": [{"value": "asthma"}]},
                {"action": "inquire", "weird_slot": [{"value": "x"}]},
            ],
        },
        {
            "speaker": "patient",
            "text": "Well, I do cough.",
            "dialog_state": {
                "positive_symptom": [{"value": "coughing"}],
                "negative_symptom": [{"value": "fever"}],
            },
        },
    ]
    g = gold_annotation("d1", utterances)
    assert g.positive_findings == ["coughing"] and g.negative_findings == ["fever"]
    assert g.diagnoses == ["asthma"]
    assert [(q.turn, q.category) for q in g.questions] == [(0, "exposure")]  # occupation -> exposure
    assert g.errors and "weird_slot" in g.errors[0]


def test_ontology_and_sources(data_root: Path) -> None:
    onto = load_ontology(data_root)
    assert (len(onto.symptoms), len(onto.diseases), len(onto.antecedents)) == (103, 52, 31)
    assert list_interview_sources() == ["fareez", "meditod"]
    s = load_interviews("m", "meditod", data_root, ids=["317"])
    assert [iv.id for iv in s.interviews] == ["317"] and s.files[0].name == "dialogs.json"
    with pytest.raises(KeyError, match="fareez"):
        load_interviews("x", "nope", data_root)
