"""The annotators' vocabulary: MediTOD ontology synonyms, cleaned, renamed and supplemented.

How the symptom lexicon is built (``build_symptom_lexicon``), in order, later steps overriding earlier:

1. **Ontology**: each of the 103 ``all_symptom_values`` entries contributes its code, display name and
   keywords. The keywords are UMLS index strings and many are noise for matching speech ("chest" and
   "pain" for *chest pain*, "heart" for *palpitation*, "back structure" for *nasal itching*), so a keyword
   is kept only if it (a) uses plain characters (letters, digits, space, ``' - /``), (b) does not end in
   "nos", (c) is not a body location of ``all_symptom_locations``, not in ``GENERIC_KEYWORDS`` or
   ``DROPPED_KEYWORDS`` and has no anatomy word (``EXCLUDED_WORDS``), (d) shares a word stem (first four
   letters) with a non-generic word of its entry's code, display name or canonical name, and (e) is
   claimed by one canonical name only, unless it *is* that name (a keyword shared by several entries is
   ambiguous and dropped).
2. **Renames** (``SYMPTOM_RENAMES``): the labelling tool's codes differ from the names of the released
   (UMLS-canonicalised) MediTOD annotations, which are what gold files and the network analysis use. The
   table maps a tool code to the released name wherever the public sample attests it (``cough`` ->
   ``coughing``, ``sore throat`` -> ``pharyngitis``, fatigue -> ``bedridden``, ...). Codes not attested
   keep the tool's code as their name. Codes that are not findings (``all``, ``general enquiry``) are
   dropped.
3. **Supplement** (``synonyms.SYMPTOM_SYNONYMS``, ``MULTI_SYMPTOM_TERMS``): lay phrasings patients and physicians
   use ("short of breath", "heart racing", "can't smell"), written from general clinical vocabulary and
   checked against the three public gold dialogues. Because the gold dialogues informed this list, F1 on
   them is an in-sample figure (see ``evaluate``).
4. **Block terms** (``synonyms.SYMPTOM_BLOCKS``): phrases consumed without a finding, so that "blood pressure",
   "cough syrup" or "pain medication" do not yield *hemoptysis*, *coughing* or *pain*.

The diagnosis lexicon (``build_disease_lexicon``) follows the same steps over ``all_diseases`` plus
``DISEASE_SYNONYMS`` (respiratory OSCE differentials; the four gold-attested names are spelled exactly as
MediTOD writes them: *chronic bronchitis*, *covid-19 virus disease*, *chronic obstructive airway disease*,
*seborrheic keratosis*).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from medagent.interview.annotate.matcher import Lexicon
from medagent.interview.annotate.synonyms import (
    DISEASE_BLOCKS,
    DISEASE_SYNONYMS,
    MULTI_SYMPTOM_TERMS,
    SYMPTOM_BLOCKS,
    SYMPTOM_SYNONYMS,
)
from medagent.interview.meditod import Ontology, OntologyEntry

SYMPTOM_RENAMES: dict[str, str] = {
    "cough": "coughing",
    "wheez": "wheezing",
    "wheez inhale": "wheezing",
    "wheez exhale": "wheezing",
    "dizzyness": "dizziness",
    "stunning": "dizziness",
    "fainting": "syncope",
    "palpitation": "palpitations",
    "sore throat": "pharyngitis",
    "runny nose": "rhinorrhea",
    "taste loss": "ageusia",
    "smell loss": "anosmia",
    "smell problem": "sense of smell altered",
    "head ache": "headache",
    "hoarse tone": "dysphonia",
    "speech volume": "dysphonia",
    "vision problem": "visual impairment",
    "hearing problem": "hearing impairment",
    "stool problem": "change in faeces/bowel movements",
    "bowel movement": "change in faeces/bowel movements",
    "urination": "difficulty passing urine",
    "vomitting": "vomiting",
    "projectile vomitting": "vomiting",
    "chest pain rest": "chest pain at rest",
    "fatigue extended": "bedridden",
    "fatigue sleep": "bedridden",
    "widespread pain": "pain",
    "sleep hydrosis": "night sweats",
    "anorexia": "loss of appetite",
}
NON_FINDING_CODES = frozenset({"all", "general enquiry", "symptom speedup", "general", "thanatophobia"})

# Keywords too generic to mean one finding when heard in an interview (kept only as an entry's own name).
GENERIC_KEYWORDS = frozenset(
    [
        "pain",
        "ache",
        "aches",
        "painful",
        "discomfort",
        "burning",
        "spell",
        "spells",
        "bed",
        "date",
        "complication",
        "complications",
        "os",
        "cor",
        "cardiac",
        "heart",
        "lung",
        "lungs",
        "chest",
        "eye",
        "eyes",
        "nose",
        "mouth",
        "face",
        "back",
        "neck",
        "head",
        "throat",
        "symptom",
        "symptoms",
        "disease",
        "disorder",
        "syndrome",
        "infection",
        "infections",
        "food",
        "poisoning",
        "neoplasm",
        "neoplasia",
        "neoplasms",
        "nasal",
        "abdominal",
        "abdomen",
        "tongue",
        "feet",
        "foot",
        "limb",
        "limbs",
        "arm",
        "arms",
        "leg",
        "legs",
        "extremity",
        "extremities",
        "jaw",
        "eyelid",
        "globe",
        "oculus",
        "facial",
        "gas",
        "spasm",
        "rigid",
        "rigidity",
        "faint",
        "fainted",
        "ulcer",
        "clot",
        "clots",
        "discharge",
        "drainage",
        "prolapse",
        "seizure",
        "seizures",
        "asthenia",
        "debility",
        "diseases",
        "pulmonary",
    ]
)

# Words that make a keyword name a body part or a product, not a finding ("lung structure", "flu vaccine").
EXCLUDED_WORDS = frozenset(
    [
        "structure",
        "region",
        "regions",
        "area",
        "part",
        "proper",
        "cavity",
        "cavities",
        "compartment",
        "segment",
        "subdivision",
        "anatomy",
        "regio",
        "regiones",
        "muscle",
        "muscles",
        "musculature",
        "vaccine",
        "vaccines",
        "hormone",
        "hormones",
        "preparation",
    ]
)
# Keywords that pass the rules above but mean something else in speech ("whoops", stomach "ulcers").
DROPPED_KEYWORDS = frozenset(
    [
        "whoops",
        "ulcers",
        "ulcerate",
        "ulcerated",
        "ulcerative",
        "ulcerative lesions",
        "ulcus",
        "d - diarrhoea",
        "redness skin",
        "diarrhea running",
        "paraesthesia",
        "parasthesia",
        "cough",
        "coughs",
        "coughing",
        "coughing - function",
        "observation of cough",
        "pulmo",
        "pulmones",
        "embolic",
        "pancreas",
        "pancreatic",
        "hiv/aids vaccines",
    ]
)

DISEASE_RENAMES: dict[str, str] = {
    "heart disease": "heart diseases",
    "lung disease": "lung diseases",
    "whooping cough": "pertussis",
}
NON_DISEASE_CODES = frozenset({"abdomen", "scombroid food poisoning", "inguinal hernia"})
_PLAIN = re.compile(r"^[a-z0-9 '\-/]+$")


def _stems(text: str) -> set[str]:
    return {w[:4] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in GENERIC_KEYWORDS}


def _clean_keywords(entry: OntologyEntry, name: str, anatomy: frozenset[str]) -> list[str]:
    own = _stems(f"{entry.code} {entry.display_name} {name}")
    out = []
    for raw in entry.keywords:
        k = " ".join(raw.lower().split())
        if not _PLAIN.match(k) or k.endswith(" nos") or k in GENERIC_KEYWORDS or k in DROPPED_KEYWORDS:
            continue
        if k in anatomy or EXCLUDED_WORDS & set(k.split()) or not (own & _stems(k)):
            continue
        out.append(k)
    return out


def _ontology_terms(
    entries: Iterable[OntologyEntry], renames: dict[str, str], drop: frozenset[str], anatomy: frozenset[str]
) -> list[tuple[str, tuple[str, ...]]]:
    claims: dict[str, set[str]] = {}
    own: dict[str, str] = {}
    for e in entries:
        if e.code in drop:
            continue
        name = renames.get(e.code, e.code)
        for surface in (e.code, e.display_name.lower()):
            own[" ".join(surface.split())] = name
        for k in _clean_keywords(e, name, anatomy):
            claims.setdefault(k, set()).add(name)
    terms: list[tuple[str, tuple[str, ...]]] = [(s, (n,)) for s, n in own.items()]
    for k, names in sorted(claims.items()):
        if k in own:
            continue
        if len(names) == 1:
            terms.append((k, (next(iter(names)),)))
    return terms


def _anatomy(ontology: Ontology) -> frozenset[str]:
    return frozenset(re.sub(r"\((l|r)\)", "", loc.lower()).strip() for loc in ontology.locations)


def _split(table: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
    return [(s.strip(), (name,)) for name, forms in table.items() for s in forms.split("|") if s.strip()]


def _blocks(forms: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(s, ()) for s in forms.split("|")]


def build_symptom_lexicon(ontology: Ontology) -> Lexicon:
    """Canonical MediTOD symptom names and their surface forms (steps in the module docstring)."""
    terms = _ontology_terms(ontology.symptoms, SYMPTOM_RENAMES, NON_FINDING_CODES, _anatomy(ontology))
    terms += _split(SYMPTOM_SYNONYMS)
    terms += list(MULTI_SYMPTOM_TERMS.items())
    terms += _blocks(SYMPTOM_BLOCKS)
    return Lexicon(terms)


def build_disease_lexicon(ontology: Ontology) -> Lexicon:
    """Diagnosis names a physician may state: the ontology's diseases plus ``DISEASE_SYNONYMS``."""
    terms = _ontology_terms(ontology.diseases, DISEASE_RENAMES, NON_DISEASE_CODES, _anatomy(ontology))
    terms += _split(DISEASE_SYNONYMS)
    terms += _blocks(DISEASE_BLOCKS)
    return Lexicon(terms)
