"""The lexicon annotator: ontology synonyms, NegEx-style negation, question rules. Fast and offline.

Conventions (stated once here, reported next to the scores in ``annotation_eval.md``):

**Findings** come from patient utterances that answer a ``symptom`` question or no question at all (the
chief complaint, volunteered information); answers about history, medication, family, habits or
exposures describe the past or someone else and give no finding. A doctor's words are evidence only
through the answer they get.

1. *Mentions*: every symptom the lexicon finds in a patient utterance is positive, negative (inside a
   negation scope, e.g. "no chest pain", "I haven't noticed any blood") or uncertain ("maybe", "not sure";
   MediTOD's ``unknown``, not a finding); a short question echoing the doctor asserts nothing
   ("Headaches? No."); a mention followed in its clause by a normal-function word
   ("my vision's been fine") is negative. Mentions about someone else ("my sister has a cough"; spouses,
   parents, siblings, friends, "anyone") are skipped; a patient's own child is not "someone else", since a
   parent may answer for the patient.
2. *Answers*: when the preceding doctor utterance is a ``symptom`` question, the symptoms named in its
   last question sentence (the one patients answer) and not named in the answer are resolved by the
   answer: for a yes/no question, a "no"-answer makes them negative and a "yes"-answer positive (only
   when exactly one symptom was asked; "fever or chills?" - "yes" is ambiguous); for a wh-question ("when did the
   cough start?") the symptom is presupposed and positive unless the answer is a "no". A symptom the
   doctor asks about in negated form ("so no sputum?") is negative when answered "no" or "yes"; a
   question about normal function ("has your urine been normal?") inverts the reply.
3. *Interview level*: a symptom with any positive evidence is positive; otherwise negative if it has
   negative evidence. (MediTOD's dialogue state keeps the *last* value instead; positive-wins is used
   because answers to follow-up questions about an established symptom - "is the cough worse at night?"
   "not really" - would otherwise erase it.)

**Diagnoses** are diseases of the disease lexicon named by the physician in a statement (not a question
sentence) that either carries a diagnostic cue ("could be", "likely", "rule out", "differential",
"sounds like" ...) or belongs to the closing statement: the doctor turns from the last "any questions?" /
"that was everything" turn to the end (the last three doctor turns when there is no such turn). Negation
is not applied: a physician naming a disease to rule it out still states it in the differential.

**Questions**: ``questions.detect_questions``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from medagent.interview.annotate.matcher import (
    SENTENCE_END,
    Lexicon,
    Mention,
    polarity,
    sentences,
    tokenize,
    trigger_scopes,
)
from medagent.interview.annotate.questions import detect_questions, is_question_sentence, strip_leading
from medagent.interview.annotate.vocab import build_disease_lexicon, build_symptom_lexicon
from medagent.interview.meditod import Ontology
from medagent.interview.transcripts import Interview
from medagent.interview.types import Annotation

# ConText-style "other experiencer" triggers; their scope runs to the end of the clause.
_OTHERS = frozenset(
    [
        "wife",
        "husband",
        "partner",
        "boyfriend",
        "girlfriend",
        "fiance",
        "fiancee",
        "brother",
        "brothers",
        "sister",
        "sisters",
        "mom",
        "mother",
        "mum",
        "dad",
        "father",
        "parents",
        "grandmother",
        "grandfather",
        "grandma",
        "grandpa",
        "uncle",
        "aunt",
        "cousin",
        "friend",
        "friends",
        "coworker",
        "coworkers",
        "colleague",
        "colleagues",
        "roommate",
        "roommates",
        "anyone",
        "anybody",
        "someone",
        "somebody",
        "everyone",
        "everybody",
        "nobody",
        "people",
    ]
)
_CLAUSE_END = frozenset(".?!;") | frozenset({"but", "however", "although", "though", "and"})

_PARTICLES = {
    "no": "negative",
    "nope": "negative",
    "nah": "negative",
    "yes": "positive",
    "yeah": "positive",
    "yep": "positive",
    "yup": "positive",
    "ya": "positive",
    "yah": "positive",
    "mhm": "positive",
    "definitely": "positive",
    "absolutely": "positive",
}
_FILLERS = frozenset(["um", "uh", "uhm", "umm", "oh", "well", "so", "hmm", "ah", "mm", "like", "okay", "ok"])
_HEDGES = frozenset(["maybe", "perhaps", "possibly", "unsure"])
_ECHO_TOKENS = 5  # word tokens plus the "?"
# Words saying a function is normal: after a mention they negate it; in a question they invert a "yes".
_NORMAL = frozenset(["fine", "ok", "okay", "normal", "good", "great", "regular", "alright", "unchanged"])
_NORMAL_QUESTION = frozenset(["fine", "normal", "regular", "unchanged"])
_HEDGE_PAIRS = frozenset({("not", "sure"), ("don't", "know"), ("i", "guess")})
_NEGATIVE_START = (
    ("not",),
    ("nothing",),
    ("none",),
    ("never",),
    ("negative",),
    ("i", "don't"),
    ("i", "haven't"),
    ("i", "have", "not"),
    ("i", "didn't"),
    ("i", "do", "not"),
    ("i'm", "not"),
    ("i", "wouldn't"),
    ("i", "hadn't"),
    ("haven't",),
    ("don't",),
)
_POSITIVE_START = (
    ("i", "do"),
    ("i", "have"),
    ("i", "did"),
    ("i", "am"),
    ("i", "think", "so"),
    ("i've", "had"),
    ("i've", "been"),
    ("sometimes",),
    ("a", "little"),
    ("a", "bit"),
    ("sure",),
    ("correct",),
    ("right",),
    ("uh", "huh"),
)
_WH_START = re.compile(r"^(?:when|how (?!about)|what (?!about)|where|which|why|who|describe|tell me)", re.I)
_DIAGNOSTIC_CUE = re.compile(
    r"\bcould be\b|\bmight be\b|\bmay be\b|\blikely\b|\bprobabl\w*|\bpossib\w*|\b(?:sounds|seems|looks) like\b|"
    r"\bi think\b|\bthinking\b|\bsuspect\w*|\bconcern\w*|\bworried\b|\brul(?:e|ing) out\b|\bdifferential\b|"
    r"\bconsistent with\b|\bsuggest\w*|\bdiagnos\w*|\bsomething (?:like|called)\b|\bon the list\b|\bunlikely\b|"
    r"\bcaus\w*|\bdue to\b|\brelated to\b",
    re.IGNORECASE,
)
_CLOSER = re.compile(
    r"\bany (?:other )?questions\b|\bthose (?:were|are) all\b|\bthat(?:'s| was| is) (?:all|everything)\b|"
    r"\bquestions (?:for me|of your own)\b|\banything (?:else )?(?:that )?(?:i (?:missed|forgot)|you (?:wanted|want) to)",
    re.IGNORECASE,
)


def other_experiencer_spans(tokens: Sequence[str]) -> list[tuple[int, int]]:
    """Token spans about someone other than the patient: from an ``_OTHERS`` word to the clause end."""
    spans = []
    for i, tok in enumerate(tokens):
        if tok in _OTHERS:
            end = i + 1
            while end < len(tokens) and tokens[end] not in _CLAUSE_END:
                end += 1
            spans.append((i, end))
    return spans


def _inside(m: Mention, spans: Sequence[tuple[int, int]]) -> bool:
    return any(s <= m.start < e for s, e in spans)


def _normal_after(tokens: Sequence[str], end: int) -> bool:
    """A normal-function word closes the clause right after a mention ("vision's been fine")."""
    for tok in tokens[end : end + 5]:
        if tok in SENTENCE_END or tok in _CLAUSE_END or tok == ",":
            return False
        if tok in _NORMAL:
            return True
    return False


def answer_polarity(text: str) -> str:
    """``negative``, ``positive`` or ``unknown`` for a reply to a yes/no question.

    In order: a reply opening with "no"/"nope"/"nah" is negative; otherwise the first yes/no particle
    decides ("Had a cold, but no, nothing recent"), unless a hedge ("maybe", "not sure") comes first; a
    bare "no" before a word ("no blood") is a negation trigger, not a particle. Failing a particle, the
    opening words decide ("I haven't", "not really" / "I do", "sometimes").
    """
    tokens = tokenize(text)
    words = [t for t in tokens if t[0].isalnum()]
    while words and words[0] in _FILLERS:
        words.pop(0)
    if words and _PARTICLES.get(words[0]) == "negative":
        return "negative"
    for i, tok in enumerate(tokens):
        if tok in _HEDGES or tuple(tokens[i : i + 2]) in _HEDGE_PAIRS:
            return "unknown"
        kind = _PARTICLES.get(tok)
        if kind is None:
            continue
        nxt = tokens[i + 1] if i + 1 < len(tokens) else "."
        if (
            tok == "no"
            and nxt[0].isalnum()
            and nxt not in _FILLERS
            and nxt not in {"i", "not", "nothing", "no"}
        ):
            continue  # "no blood": a negation trigger, not an answer particle
        return kind
    for starts, kind in ((_NEGATIVE_START, "negative"), (_POSITIVE_START, "positive")):
        if any(tuple(words[: len(s)]) == s for s in starts):
            return kind
    return "unknown"


class LexiconAnnotator:
    """Rule-based MediTOD-style annotation (conventions in the module docstring).

    Args:
        symptoms: Symptom lexicon (``vocab.build_symptom_lexicon``).
        diseases: Disease lexicon (``vocab.build_disease_lexicon``).
    """

    name = "lexicon"

    def __init__(self, symptoms: Lexicon, diseases: Lexicon) -> None:
        self.symptoms = symptoms
        self.diseases = diseases

    @classmethod
    def from_ontology(cls, ontology: Ontology) -> LexiconAnnotator:
        return cls(build_symptom_lexicon(ontology), build_disease_lexicon(ontology))

    # Findings --------------------------------------------------------------------------------------
    def mentions(self, text: str) -> list[tuple[str, str]]:
        """``(name, polarity)`` for each symptom the patient says about themself in ``text``.

        A short question echoing the doctor ("Headaches? No...") asserts nothing and is skipped; a longer
        sentence with a tag ("..., you know?") is a statement.
        """
        text = " ".join(
            s for s in sentences(text) if not (s.endswith("?") and len(tokenize(s)) <= _ECHO_TOKENS)
        )
        tokens = tokenize(text)
        found = self.symptoms.find(tokens)
        scopes = trigger_scopes(tokens, skip=[(m.start, m.end) for m in found])
        others = other_experiencer_spans(tokens)
        out: list[tuple[str, str]] = []
        for m in found:
            if _inside(m, others):
                continue
            pol = polarity(m, scopes)
            if pol == "positive" and _normal_after(tokens, m.end):
                pol = "negative"  # "my vision's been fine", "hearing has been OK"
            out.extend((c, pol) for c in m.canonicals)
        return out

    @staticmethod
    def _last_question(question: str) -> str:
        last = [s for s in sentences(question) if is_question_sentence(s)][-1:]
        return strip_leading(last[0]) if last else ""

    def _asked(self, question: str) -> tuple[list[str], list[str], bool]:
        """Symptoms asked in the last question sentence: plain, negated, and whether it is a wh-question."""
        last = self._last_question(question)
        if not last:
            return [], [], False
        tokens = tokenize(last)
        found = self.symptoms.find(tokens)
        scopes = trigger_scopes(tokens, skip=[(m.start, m.end) for m in found])
        others = other_experiencer_spans(tokens)
        plain: list[str] = []
        negated: list[str] = []
        for m in found:
            if _inside(m, others):
                continue
            target = negated if polarity(m, scopes) == "negative" else plain
            target.extend(c for c in m.canonicals if c not in target)
        return plain, negated, bool(_WH_START.match(last))

    def asked_symptoms(self, question: str) -> list[str]:
        """The symptoms the last question sentence of ``question`` asks about (plain or negated)."""
        plain, negated, _ = self._asked(question)
        return plain + [n for n in negated if n not in plain]

    def answer_findings(self, answer: str, question: str | None) -> list[tuple[str, str]]:
        """Evidence ``(name, polarity)`` from one patient turn answering ``question`` (a symptom question)."""
        evidence = self.mentions(answer)
        if question is None:
            return evidence
        said = {name for name, _ in evidence}
        plain, negated, wh = self._asked(question)
        reply = answer_polarity(answer)
        if _NORMAL_QUESTION & set(tokenize(self._last_question(question))) and reply != "unknown":
            # "has everything been normal with your urine?" - "yeah": a yes denies the symptom.
            reply = "negative" if reply == "positive" else "positive"
        for name in negated:
            if name not in said and reply in ("negative", "positive"):
                evidence.append((name, "negative"))
        open_plain = [n for n in plain if n not in said and n not in negated]
        for name in open_plain:
            if wh:
                if reply != "negative":
                    evidence.append((name, "positive"))
            elif reply == "negative":
                evidence.append((name, "negative"))
            elif reply == "positive" and len(plain) == 1:
                evidence.append((name, "positive"))
        return evidence

    # Diagnoses -------------------------------------------------------------------------------------
    def diagnoses(self, interview: Interview) -> list[str]:
        doctor = [t for t in interview.turns if t.speaker == "doctor"]
        closers = [t.index for t in doctor if _CLOSER.search(t.text)]
        fallback = doctor[-3].index if len(doctor) >= 3 else 0
        closing_start = closers[-1] if closers else fallback
        out: list[str] = []
        for turn in doctor:
            for sentence in sentences(turn.text):
                if sentence.endswith("?"):
                    continue
                if turn.index < closing_start and not _DIAGNOSTIC_CUE.search(sentence):
                    continue
                tokens = tokenize(sentence)
                others = other_experiencer_spans(tokens)
                for m in self.diseases.find(tokens):
                    if not _inside(m, others):
                        out.extend(c for c in m.canonicals if c not in out)
        return out

    # Whole interview -------------------------------------------------------------------------------
    def annotate(self, interview: Interview) -> Annotation:
        """Annotates one interview; never raises on odd text (an empty interview gives empty fields)."""
        questions = detect_questions(interview.turns, self.symptoms, self.diseases)
        by_turn = {q.turn: q for q in questions}
        evidence: dict[str, set[str]] = {}
        turns = interview.turns
        for i, turn in enumerate(turns):
            if turn.speaker != "patient":
                continue
            q = by_turn.get(turns[i - 1].index) if i > 0 and turns[i - 1].speaker == "doctor" else None
            if q is not None and q.category != "symptom":
                continue  # an answer about history, drugs, family, exposures...: not a current finding
            for name, pol in self.answer_findings(turn.text, q.text if q is not None else None):
                evidence.setdefault(name, set()).add(pol)
        positive = [n for n, p in evidence.items() if "positive" in p]
        negative = [n for n, p in evidence.items() if "positive" not in p and "negative" in p]
        return Annotation(
            interview_id=interview.id,
            source=interview.source,
            annotator=self.name,
            positive_findings=positive,
            negative_findings=negative,
            diagnoses=self.diagnoses(interview),
            questions=questions,
        )
