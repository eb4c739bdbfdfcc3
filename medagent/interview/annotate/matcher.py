"""Tokens, a longest-match term lexicon and NegEx-style negation scopes.

Text is lower-cased and cut into word tokens (``[a-z0-9]+`` with an optional contraction such as ``'t`` or
``'ve``; ``'s`` is a token of its own) and punctuation tokens (``. ? ! ; ,``). A term matches a run of whole word tokens, so word boundaries come for
free ("pain" never matches inside "painkiller"), and at each position the longest term wins ("chest pain"
before "pain", "blood pressure" (a block term) before "blood").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# "'s" is split off ("vision's" -> "vision", "'s") so that terms match possessives and "it's"; other
# contractions stay whole ("haven't", "i've") because negation triggers are written that way.
_TOKEN = re.compile(r"[a-z0-9]+(?:'(?!s\b)[a-z]+)?|'s\b|[.?!;,]")
SENTENCE_END = frozenset(".?!;")


def tokenize(text: str) -> list[str]:
    """Lower-cased word and punctuation tokens (curly apostrophes folded to ``'``)."""
    return _TOKEN.findall(text.lower().replace("\u2019", "'").replace("\u2018", "'"))


def _plural(tokens: tuple[str, ...]) -> tuple[str, ...] | None:
    last = tokens[-1]
    if not last.isalpha() or len(last) < 3 or last.endswith("s"):
        return None
    suffix = "es" if last.endswith(("sh", "ch", "x", "z")) else "s"
    return (*tokens[:-1], last + suffix)


@dataclass(frozen=True)
class Mention:
    """A lexicon hit: word-token span ``[start, end)`` and the canonical names it stands for.

    ``canonicals`` is empty for a *block* term: a phrase consumed so that a shorter term inside it does not
    fire ("blood pressure" hides "blood", "flu shot" hides "flu").
    """

    start: int
    end: int
    canonicals: tuple[str, ...]
    surface: str


class Lexicon:
    """Surface forms -> canonical names, matched longest-first on whole tokens.

    Args:
        terms: ``(surface, canonicals)`` pairs; an empty ``canonicals`` makes a block term. A later pair
            for the same surface replaces an earlier one, so callers list general sources first and
            overrides last. Regular plurals of the last word are added unless listed explicitly.
    """

    def __init__(self, terms: Iterable[tuple[str, Sequence[str]]]) -> None:
        table: dict[tuple[str, ...], tuple[str, ...]] = {}
        explicit: set[tuple[str, ...]] = set()
        for surface, canonicals in terms:
            toks = tuple(t for t in tokenize(surface) if t not in SENTENCE_END and t != ",")
            if not toks:
                continue
            table[toks] = tuple(dict.fromkeys(canonicals))
            explicit.add(toks)
            plural = _plural(toks)
            if plural is not None and plural not in explicit:
                table[plural] = table[toks]
        self.table = table
        self._lengths: dict[str, list[int]] = {}
        for toks in table:
            self._lengths.setdefault(toks[0], []).append(len(toks))
        for first, lengths in self._lengths.items():
            self._lengths[first] = sorted(set(lengths), reverse=True)

    def __len__(self) -> int:
        return len(self.table)

    def canonical_names(self) -> list[str]:
        """Every canonical name the lexicon can emit, sorted."""
        return sorted({c for cs in self.table.values() for c in cs})

    def find(self, tokens: Sequence[str]) -> list[Mention]:
        """Longest-match scan over ``tokens`` (from ``tokenize``); block terms are not returned."""
        out: list[Mention] = []
        i = 0
        n = len(tokens)
        while i < n:
            hit = None
            for length in self._lengths.get(tokens[i], ()):
                if i + length <= n:
                    key = tuple(tokens[i : i + length])
                    if key in self.table:
                        hit = (length, self.table[key])
                        break
            if hit is None:
                i += 1
                continue
            length, canonicals = hit
            if canonicals:
                out.append(Mention(i, i + length, canonicals, " ".join(tokens[i : i + length])))
            i += length
        return out

    def names_in(self, text: str) -> list[str]:
        """Canonical names mentioned in ``text``, in order of first mention."""
        return list(dict.fromkeys(c for m in self.find(tokenize(text)) for c in m.canonicals))


# NegEx-style triggers (Chapman et al. 2001), tuned for spoken answers. Multi-token triggers are matched
# before single tokens. Pseudo-triggers are phrases that contain a trigger but do not negate.
NEGATION_TRIGGERS = (
    "no",
    "not",
    "never",
    "without",
    "deny",
    "denies",
    "denied",
    "none",
    "nothing",
    "nor",
    "neither",
    "haven't",
    "havent",
    "hasn't",
    "hadn't",
    "don't",
    "dont",
    "doesn't",
    "didn't",
    "isn't",
    "wasn't",
    "aren't",
    "weren't",
    "won't",
    "no longer",
    "free of",
    "negative for",
    "absence of",
)
UNCERTAINTY_TRIGGERS = (
    "maybe",
    "perhaps",
    "possibly",
    "might",
    "unsure",
    "not sure",
    "don't know",
    "dont know",
    "not certain",
    "i guess",
    "may have",
    "could have",
)
PSEUDO_TRIGGERS = (
    "not only",
    "not just",
    "not too",
    "not that bad",
    "not bad",
    "not as",
    "not much",
    "not very",
    "not so",
    "no matter",
    "not the",
)
# Words that end a trigger's scope (besides . ? ! ;): contrast and restriction, as in NegEx's terminators,
# and "how"/"what" opening a new question ("no weight loss, how about fatigue?").
SCOPE_TERMINATORS = frozenset(
    [
        "but",
        "however",
        "although",
        "though",
        "except",
        "besides",
        "apart",
        "aside",
        "just",
        "only",
        "still",
        "yet",
        "which",
        "because",
        "cause",
        "since",
        "whereas",
        "unless",
        "how",
        "what",
    ]
)
PRONOUNS = frozenset(
    ["i", "i'm", "i've", "i'd", "it", "that", "this", "we", "he", "she", "they", "you", "my"]
)
# After a bare "no", these mean "no" answered the question ("No, I ...", "No um it ..."), not "no X".
_ANSWER_FOLLOWERS = PRONOUNS | frozenset(
    ["um", "uh", "uhm", "well", "yeah", "yes", "not", "no", "but", "just", "so", "oh", "actually"]
)
SCOPE_WINDOW = 6


def _trigger_table(phrases: Iterable[str]) -> dict[tuple[str, ...], str]:
    return {tuple(tokenize(p)): p for p in phrases}


_TRIGGERS: dict[tuple[str, ...], str] = {
    **{k: "negative" for k in _trigger_table(NEGATION_TRIGGERS)},
    **{k: "uncertain" for k in _trigger_table(UNCERTAINTY_TRIGGERS)},
    **{k: "pseudo" for k in _trigger_table(PSEUDO_TRIGGERS)},
}
_MAX_TRIGGER = max(len(k) for k in _TRIGGERS)


def trigger_scopes(tokens: Sequence[str], skip: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int, str]]:
    """Scopes ``(start, end, kind)`` of negation/uncertainty triggers in ``tokens``.

    A scope starts after its trigger and covers at most ``SCOPE_WINDOW`` word tokens, stopping at
    sentence punctuation, a terminator word, or "and"/"or" followed by a pronoun (a new clause). A bare
    "no" followed by punctuation, a pronoun or a filler is an answer particle ("No, I ...") and opens no
    scope. Tokens inside ``skip`` spans (lexicon terms that contain a trigger, such as "can't smell") are
    not triggers.
    """
    blocked = {i for s, e in skip for i in range(s, e)}
    scopes: list[tuple[int, int, str]] = []
    i, n = 0, len(tokens)
    while i < n:
        hit = None
        if i not in blocked:
            for length in range(min(_MAX_TRIGGER, n - i), 0, -1):
                key = tuple(tokens[i : i + length])
                if key in _TRIGGERS and not any(j in blocked for j in range(i, i + length)):
                    hit = (key, _TRIGGERS[key])
                    break
        if hit is None:
            i += 1
            continue
        trigger, kind = hit
        after = i + len(trigger)
        if trigger == ("no",) and (
            after >= n or tokens[after] in _ANSWER_FOLLOWERS or not tokens[after][0].isalnum()
        ):
            i = after
            continue
        if kind != "pseudo":
            end, words = after, 0
            while end < n and words < SCOPE_WINDOW:
                tok = tokens[end]
                if tok in SENTENCE_END or tok in SCOPE_TERMINATORS:
                    break
                if tok in ("and", "or") and end + 1 < n and tokens[end + 1] in PRONOUNS:
                    break
                if tok != ",":
                    words += 1
                end += 1
            scopes.append((after, end, kind))
        i = after
    return scopes


def polarity(mention: Mention, scopes: Sequence[tuple[int, int, str]]) -> str:
    """``negative``, ``uncertain`` or ``positive``: the nearest preceding scope covering the mention."""
    best: tuple[int, str] | None = None
    for start, end, kind in scopes:
        if start <= mention.start < end and (best is None or start > best[0]):
            best = (start, kind)
    return best[1] if best else "positive"


def sentences(text: str) -> list[str]:
    """Splits on ``. ? !`` followed by space or end (keeps the punctuation)."""
    parts = re.split(r"(?<=[.?!])\s+|(?<=\?)(?=[A-Z])", text.strip())
    return [p.strip() for p in parts if p and p.strip()]
