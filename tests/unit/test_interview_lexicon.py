"""The lexicon annotator: term matching, negation scopes, answer inference, diagnoses, question rules."""

from pathlib import Path

import pytest

from medagent.interview.annotate.lexicon import LexiconAnnotator, answer_polarity
from medagent.interview.annotate.matcher import Lexicon, polarity, sentences, tokenize, trigger_scopes
from medagent.interview.annotate.questions import categorize, detect_questions, is_question_sentence
from medagent.interview.meditod import load_ontology
from medagent.interview.transcripts import Interview, parse_transcript
from medagent.interview.types import Turn


@pytest.fixture(scope="module")
def ann(data_root: Path) -> LexiconAnnotator:
    return LexiconAnnotator.from_ontology(load_ontology(data_root))


def _polarities(text: str, lex: Lexicon) -> dict[str, str]:
    tokens = tokenize(text)
    found = lex.find(tokens)
    scopes = trigger_scopes(tokens, skip=[(m.start, m.end) for m in found])
    return {c: polarity(m, scopes) for m in found for c in m.canonicals}


LEX = Lexicon(
    [
        ("pain", ["pain"]),
        ("chest pain", ["chest pain"]),
        ("cough", ["coughing"]),
        ("blood", ["hemoptysis"]),
        ("blood pressure", []),
        ("can't smell", ["anosmia"]),
        ("fever", ["fever"]),
        ("productive cough", ["coughing", "sputum"]),
    ]
)


def test_longest_match_word_boundaries_blocks_and_plurals() -> None:
    assert LEX.names_in("Chest pain, and painkillers for the pain.") == ["chest pain", "pain"]
    assert LEX.names_in("My blood pressure is fine") == []  # a block term hides "blood"
    assert LEX.names_in("any fevers or coughs?") == ["fever", "coughing"]
    assert LEX.names_in("a productive cough") == ["coughing", "sputum"]
    assert LEX.canonical_names() == [
        "anosmia",
        "chest pain",
        "coughing",
        "fever",
        "hemoptysis",
        "pain",
        "sputum",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("No chest pain.", {"chest pain": "negative"}),
        ("No, um I haven't noticed any blood.", {"hemoptysis": "negative"}),
        ("No, I have a cough.", {"coughing": "positive"}),  # "No," answered something else
        ("I denies fever but I do have a cough", {"fever": "negative", "coughing": "positive"}),
        ("I can't smell anything", {"anosmia": "positive"}),  # the trigger is inside the term
        ("Maybe a fever, not sure", {"fever": "uncertain"}),
        ("not only a cough", {"coughing": "positive"}),  # pseudo-trigger
        ("never had chest pain or a cough", {"chest pain": "negative", "coughing": "negative"}),
        ("it's not the chest pain, it's the cough", {"chest pain": "positive", "coughing": "positive"}),
        ("no fever. I have a cough", {"fever": "negative", "coughing": "positive"}),
        ("no weight loss, how about a fever", {"fever": "positive"}),  # "how" opens a new question
    ],
)
def test_negation_scopes(text: str, expected: dict[str, str]) -> None:
    assert _polarities(text, LEX) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("No.", "negative"),
        ("Nope.", "negative"),
        ("No never fainted in my life.", "negative"),
        ("Uh, yeah, sometimes.", "positive"),
        ("Had a cold a while ago, but no, nothing recent.", "negative"),
        ("Not really.", "negative"),
        ("I haven't noticed that.", "negative"),
        ("Uh maybe these past couple of days, yeah.", "unknown"),
        ("It started two days ago.", "unknown"),
        ("I do.", "positive"),
    ],
)
def test_answer_polarity(answer: str, expected: str) -> None:
    assert answer_polarity(answer) == expected


def test_findings_from_answers_to_symptom_questions(ann: LexiconAnnotator) -> None:
    text = (
        "D: What brings you in?\nP: I've had a cough for a week.\n"
        "D: Any fevers or chills?\nP: No.\n"
        "D: And when did the shortness of breath start?\nP: Two days ago.\n"
        "D: Have you had any chest pain?\nP: Yeah.\n"
        "D: Any headaches?\nP: Headaches? No, my head is fine.\n"
        "D: Have your bowel movements been normal?\nP: Yes.\n"
        "D: Does anyone in your family have asthma?\nP: My sister has a cough and asthma.\n"
        "D: Any wheezing or a runny nose?\nP: Um, the wheezing yes, sometimes.\n"
    )
    a = ann.annotate(parse_transcript(text, "t"))
    assert set(a.positive_findings) == {"coughing", "dyspnea", "chest pain", "wheezing"}
    # "fever or chills?" - "No." negates both; "yes" about normal bowels denies the symptom; the runny nose
    # was asked together with wheezing and only wheezing was affirmed, so it stays unknown.
    assert set(a.negative_findings) == {"fever", "chills", "headache", "change in faeces/bowel movements"}


def test_someone_else_and_normal_function(ann: LexiconAnnotator) -> None:
    assert ann.mentions("My husband has had a fever, I feel fine") == []
    assert ann.mentions("my vision's been fine") == [("visual impairment", "negative")]
    assert ann.mentions("my son has had a fever") == [("fever", "positive")]  # a parent answering


def test_diagnoses_from_cues_and_closing(ann: LexiconAnnotator) -> None:
    text = (
        "D: Have you ever had pneumonia?\nP: No.\n"
        "D: Your brother had a heart attack, could that be related?\nP: Maybe.\n"
        "D: Did you have any questions for me?\nP: Is it covid?\n"
        "D: It could be COVID, or possibly pneumonia. We'll also rule out a pulmonary embolism.\nP: OK.\n"
    )
    a = ann.annotate(parse_transcript(text, "t"))
    assert a.diagnoses == ["covid-19 virus disease", "pneumonia", "pulmonary embolism"]


@pytest.mark.parametrize(
    ("question", "category"),
    [
        ("Does anyone in your family have lung problems?", "family_history"),
        ("Any recent travel?", "travel"),
        ("Is anyone at home sick?", "exposure"),
        ("Do you have any pets?", "exposure"),
        ("What do you do for work?", "exposure"),
        ("Who do you live with?", "residence"),
        ("Have you ever been diagnosed with COPD?", "medical_history"),
        ("Do you smoke cigarettes?", "habit"),
        ("How old are you?", "basic_information"),
        ("Any allergies to medications?", "medical_history"),
        ("Are you taking any medications?", "medication"),
        ("Have you had a chest X-ray?", "medical_test"),
        ("Has this ever happened to you before?", "medical_history"),
        ("Have you had a fever in the past few days?", "symptom"),
        ("Any chest pain?", "symptom"),
        ("Are you worried this could be COVID?", "disease"),
    ],
)
def test_category_rules(ann: LexiconAnnotator, question: str, category: str) -> None:
    assert categorize(question, ann.symptoms, ann.diseases, None) == category


def test_question_detection_and_topic_continuation(ann: LexiconAnnotator) -> None:
    assert is_question_sentence("Alright, and any exposures at work, like dust.")
    assert is_question_sentence("I was wondering if you could tell me about your living situation.")
    assert not is_question_sentence("What brings you in today?")
    assert not is_question_sentence("Do you have any questions for me?")
    assert not is_question_sentence("OK, we'll get a chest X-ray.")
    assert sentences("Is it bad?Any fever? OK.") == ["Is it bad?", "Any fever?", "OK."]
    turns = [
        Turn(0, "doctor", "What brings you in?"),
        Turn(1, "patient", "Cough."),
        Turn(2, "doctor", "Do you smoke?"),
        Turn(3, "patient", "Yes."),
        Turn(4, "doctor", "OK, and how much?"),
        Turn(5, "patient", "A pack a day."),
        Turn(6, "doctor", "Any family history of lung disease?"),
        Turn(7, "doctor", "How about cancers?"),
        Turn(8, "doctor", "That's everything, thanks."),
    ]
    qs = detect_questions(turns, ann.symptoms, ann.diseases)
    assert [(q.turn, q.category) for q in qs] == [
        (2, "habit"),
        (4, "habit"),  # no rule fires: the topic continues
        (6, "family_history"),
        (7, "family_history"),  # a disease named after a family question continues it
    ]


def test_empty_and_doctor_only_interviews(ann: LexiconAnnotator) -> None:
    a = ann.annotate(Interview("e", "fareez", ()))
    assert (a.positive_findings, a.negative_findings, a.diagnoses, a.questions) == ([], [], [], [])
    b = ann.annotate(parse_transcript("D: Any cough?\nD: Any fever?", "d"))
    assert [q.category for q in b.questions] == ["symptom", "symptom"] and b.negative_findings == []
