"""Which doctor utterances are questions, and the inquiry category of each (rule table, fixed priority).

**What counts as a question.** A doctor utterance is a question when at least one of its sentences is a
*question sentence*: it ends with ``?``, or, once leading discourse markers are stripped ("OK", "alright",
"and", "so", "um" ...), it starts with an interrogative or history-taking phrase (``QUESTION_START``: "any",
"have you", "do you", "how", "when", "tell me", "I was wondering" ...). Sentences that match
``NOT_INQUIRY`` are never question sentences: the opening prompt ("what brings you in"), closing checks
("any questions for me", "how does that sound"), lifestyle chit-chat (diet, exercise) and cessation
counselling ("have you tried to quit?"), which MediTOD labels ``nod_prompt_salutations`` / ``chit-chat``
rather than ``inquire``. A declarative "you <verb> any ..." (a question transcribed without ``?``) counts.

**Category.** The question sentences of the utterance (joined) go through ``CATEGORY_RULES`` in order;
the first rule that matches decides. Then, if none matched: a symptom named by the symptom lexicon, or a
generic symptom word, gives ``symptom``; a disease named by the disease lexicon gives ``disease`` when
the doctor asks what the patient thinks or fears, else continues a family or medical history topic
("How about cancers?"), else ``medical_history``; failing all that, the
question continues the topic of the previous question ("And when did that start?", "How so?") and takes
its category (``symptom`` for the first question). Priority order, most specific context first:
family_history > travel > exposure (sick contacts, animals, environment, occupation) > residence >
medical_history ("diagnosed") > habit (incl. quitting) > basic_information > medical_history (allergy,
immunisation, hospital, surgery, known conditions) >
medication > medical_test > medical_history (past episodes) > symptom/disease lexicon > previous.
"""

from __future__ import annotations

import re

from medagent.interview.annotate.matcher import Lexicon, sentences
from medagent.interview.types import QuestionAnnotation, Turn

# Leading words stripped before testing the start of a sentence.
_LEADING = re.compile(
    r"^(?:(?:ok(?:ay)?|alright|all right|right|so|and|but|um+|uh+|uhm+|hmm+|mm+|well|now|great|good|"
    r"yeah|yes|sure|perfect|cool|i see|gotcha|then|also|next|just|oh|no|thanks|thank you|wow|"
    r"i'm sorry to hear that|sorry)[\s,.!]+)+",
    re.IGNORECASE,
)
QUESTION_START = re.compile(
    r"^(?:any|anything|anyone|anybody|have|has|had|do|does|did|are|is|was|were|can|could|would|will|"
    r"how|what|when|where|which|who|whom|why|tell me|describe|i was wondering|i wanted to ask|"
    r"i'd like to ask|let me ask|i'm going to ask|i'll ask|in terms of|as for|you \w+ any)\b",
    re.IGNORECASE,
)
NOT_INQUIRY = re.compile(
    r"\bwhat brings you\b|\bwhat can i do for you\b|\bhow can i help\b|\bwhat(?:'s| is) going on today\b|"
    r"\bany (?:other )?questions\b|\bquestions (?:for me|of your own)\b|\bhow does that sound\b|"
    r"\bdoes that sound\b|\bdoes that make sense\b|\bis that (?:ok|okay|alright|all right|fine)\b|"
    r"\banything (?:else )?(?:that )?(?:i (?:missed|forgot)|you(?:'d| would)? (?:like|want(?:ed)?) to (?:add|discuss|ask))|"
    r"\bhow(?:'s| is) your diet\b|\bin terms of (?:your )?(?:diet|exercise)\b|\bdo you (?:get to )?exercise\b|"
    r"\bhow are you (?:doing|feeling) today\b|\byou know what\b|"
    r"\b(?:thought about|tried to|tried|considered|interested in|ready to) (?:quit\w*|cutting (?:down|back)|stopping)\b",
    re.IGNORECASE,
)

_FAMILY = (
    r"\b(?:family|families|mother|mom|mum|father|dad|parents?|brothers?|sisters?|siblings?|"
    r"grand(?:mother|father|parents?|ma|pa)|aunts?|uncles?|cousins?|relatives?|runs? in)\b"
)
_EXPOSURE = (
    r"\bsick contacts?\b|\b(?:anyone|anybody|someone|people|others?|kids|children)\b[^.?]*\b(?:sick|ill|unwell|similar symptoms)\b|"
    r"\b(?:sick|ill|unwell)\b[^.?]*\b(?:around|contacts?|at home|at work)\b|\bexpos\w*|\bcontact with\b|"
    r"\bpets?\b|\banimals?\b|\bcats?\b|\bdogs?\b|\bbirds?\b|\bdust\b|\bmou?ld\b|\bfumes\b|\bchemicals?\b|"
    r"\basbestos\b|\bsilica\b|\bdaycare\b|\b(?:at|for|from|to|of) work\b|\b(?:do|did) you work\b|\bwork(?:ing)? (?:as|at|in|with|around)\b|"
    r"\bwhat do you do\b|\bjob\b|\boccupation\w*|\bemploy\w*|\bfor a living\b|\bworkplace\b|\bco-?workers?\b"
)
_HABIT = (
    r"\bsmok\w*|\bcigar\w*|\bvap(?:e|es|ing)\b|\btobacco\b|\bnicotine\b|\bpacks?\b|\balcohol\w*|\bdrink\w*|"
    r"\bbeers?\b|\bwine\b|\bliquor\b|\bmarijuana\b|\bcannabis\b|\bweed\b|\brecreational\b|\bstreet drugs\b|"
    r"\billicit\b|\bcocaine\b|\bheroin\b|\bmeth(?:amphetamine)?\b|\bcrystal\b|\bopioids?\b|\biv drugs?\b|"
    r"\binject\w*|\bsexual\w*|\bcaffeine\b|\bcoffee\b|\bquit\w*|\bcut(?:ting)? (?:back|down)\b"
)
CATEGORY_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern, re.IGNORECASE))
    for category, pattern in (
        ("family_history", _FAMILY),
        (
            "travel",
            r"\btravel\w*|\btrips?\b|\babroad\b|\boverseas\b|\bout of (?:the )?(?:country|province|state|town)\b|\bvacation\b",
        ),
        ("exposure", _EXPOSURE),
        (
            "residence",
            r"\blive\b|\blives\b|\bliving\b|\breside\w*|\bhousing\b|\bapartment\b|\bhouse\b|\bhome situation\b",
        ),
        ("medical_history", r"\bdiagnosed\b"),
        ("habit", _HABIT),
        (
            "basic_information",
            r"\bhow old are you\b|\byour age\b|\bage again\b|\bdate of birth\b|\bbirthday\b|\byour name\b|\bpronouns?\b|\bgender\b",
        ),
        (
            "medical_history",
            r"\ballerg\w*|\bvaccin\w*|\bimmuni[sz]\w*|\bshots?\b|\bhospital\w*|\bsurger(?:y|ies)\b|\boperations?\b|"
            r"\bdiagnosed\b|\b(?:medical|health) (?:conditions?|history|problems|issues)\b|\bchronic (?:conditions?|illness\w*)\b|"
            r"\bpast medical\b|\b(?:otherwise|generally) healthy\b|\bpregnan\w*",
        ),
        (
            "medication",
            r"\bmedications?\b|\bmedicines?\b|\bmeds\b|\bpills?\b|\btablets?\b|\binhalers?\b|\bpuffers?\b|\bprescri\w*|"
            r"\bover the counter\b|\bsupplements?\b|\bvitamins?\b|\bantibiotics?\b|\bsteroids?\b|\btylenol\b|\badvil\b|"
            r"\bibuprofen\b|\bacetaminophen\b|\bpuffs?\b|\bdoses?\b|\b(?:tried|taken|taking|take) anything\b|"
            r"\btreat(?:ed|ment|ments)?\b|\binsulin\b|\bbirth control\b|\bcontracepti\w*|\bremed\w*|\bcough syrup\b|"
            r"\bnebuli[sz]er\b",
        ),
        (
            "medical_test",
            r"\btests?\b|\btested\b|\btesting\b|\bx ?-?rays?\b|\bct\b|\bcat scan\b|\bscans?\b|\bmri\b|\bultrasound\b|"
            r"\bblood ?work\b|\bswabs?\b|\bpcr\b|\bspirometry\b|\bpulmonary function\b|\bpfts?\b|\becg\b|\bekg\b|"
            r"\bbiopsy\b|\bresults?\b|\b(?:take|took|taken|check\w*|measur\w*) (?:your |the |a )?temperature\b|"
            r"\bthermometer\b|\boxygen (?:levels?|saturation)\b|\bpeak flow\b|\bimaging\b",
        ),
        (
            "medical_history",
            r"\b(?:had|experienced|happened|gotten|get|been)\b[^.?]*\b(?:before|in the past(?! (?:few |couple (?:of )?|several |two |three )?(?:days?|weeks?|months?))|previously)\b|"
            r"\bever (?:had|experienced|happened|been diagnosed)\b|\bhistory of\b|\bhas this (?:ever )?happened\b",
        ),
    )
)
_SYMPTOM_WORDS = re.compile(
    r"\bsymptoms?\b|\bpain\w*|\bhurt\w*|\bache\w*|\bsore\w*|\bdiscomfort\b|\bsensation\b|\bfeel(?:ing)? (?:sick|unwell)\b",
    re.IGNORECASE,
)
_DISEASE_CONCERN = re.compile(
    r"\bworr\w*|\bconcern\w*|\bthink\w*|\bwonder\w*|\bsuspect\w*|\bheard of\b|\bknow what\b|\bcould (?:it|this) be\b",
    re.IGNORECASE,
)


def strip_leading(sentence: str) -> str:
    return _LEADING.sub("", sentence.strip()).strip()


def is_question_sentence(sentence: str) -> bool:
    """``?``-final or interrogative/history-taking start, and not an opening/closing/chit-chat check."""
    s = sentence.strip()
    if not s or NOT_INQUIRY.search(s):
        return False
    return s.endswith("?") or bool(QUESTION_START.match(strip_leading(s)))


def question_text(text: str) -> str | None:
    """The question sentences of a doctor utterance joined with a space, or ``None`` if it asks nothing."""
    qs = [s for s in sentences(text) if is_question_sentence(s)]
    return " ".join(qs) if qs else None


def categorize(question: str, symptoms: Lexicon, diseases: Lexicon, previous: str | None) -> str:
    """The inquiry category of ``question`` (rules and priority in the module docstring)."""
    for category, pattern in CATEGORY_RULES:
        if pattern.search(question):
            return category
    if symptoms.names_in(question) or _SYMPTOM_WORDS.search(question):
        return "symptom"
    if diseases.names_in(question):
        if _DISEASE_CONCERN.search(question):
            return "disease"
        # "How about cancers?" after a family question continues the family history.
        return previous if previous in ("family_history", "medical_history") else "medical_history"
    return previous or "symptom"


def detect_questions(
    turns: tuple[Turn, ...] | list[Turn], symptoms: Lexicon, diseases: Lexicon
) -> list[QuestionAnnotation]:
    """Every doctor question of an interview, in order, with its category."""
    out: list[QuestionAnnotation] = []
    previous: str | None = None
    for turn in turns:
        if turn.speaker != "doctor":
            continue
        q = question_text(turn.text)
        if q is None:
            continue
        previous = categorize(q, symptoms, diseases, previous)
        out.append(QuestionAnnotation(turn=turn.index, text=turn.text, category=previous))
    return out
