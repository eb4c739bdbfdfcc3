"""How sure the model is of a multiple-choice answer: the gate's two measures (``medagent.agent.gated``).

``letter_probability`` reads the chosen letter's probability from the token log-probabilities of the reply
(llama.cpp's server and vLLM return them for ``top_logprobs``). Both report the model's distribution before
grammar constraints, so the probability is renormalised over the option letters seen at that position: it
answers "of the options, how much does the model prefer this one", whatever else it would have written
unconstrained. ``agreement`` is the fallback for backends without logprobs: the share of k sampled answers
that agree with the greedy one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from medagent.agent.answers import locate_choice
from medagent.llm.base import ChatResponse, TokenLogprob
from medagent.types import INVALID

# Characters around a letter that still make a token "that letter": ' B', '(B', 'B.', '"B'.
_AROUND = " \t\n\"'()[]{}.:,*"


def letter_probability(resp: ChatResponse, options: dict[str, str]) -> float | None:
    """P(chosen letter) among the option letters at the token that wrote it; None without usable logprobs.

    None when the backend returned no logprobs, the reply is ``INVALID``, the reply named the option by
    its text, or the tokens do not spell the reply (a backend that dropped some).
    """
    if not resp.logprobs:
        return None
    text = "".join(t.token for t in resp.logprobs)
    letter, offset = locate_choice(text, options)
    if letter == INVALID or offset is None or letter != locate_choice(resp.content, options)[0]:
        return None
    token = _token_at(resp.logprobs, offset)
    if token is None or _letter(token.token, options) != letter:
        return None
    # log-probability of each option letter at this position (variants such as 'B' and ' B' summed).
    seen: dict[str, list[float]] = {letter: [token.logprob]}
    for alt, lp in token.top:
        key = _letter(alt, options)
        if key is not None and not (key == letter and alt == token.token):
            seen.setdefault(key, []).append(lp)
    mass = {k: sum(math.exp(lp) for lp in lps) for k, lps in seen.items()}
    total = sum(mass.values())
    return mass[letter] / total if total > 0 else None


def agreement(answer: str, samples: Sequence[str]) -> float:
    """The share of ``samples`` equal to ``answer`` (0 for an ``INVALID`` answer or no samples)."""
    if answer == INVALID or not samples:
        return 0.0
    return sum(s == answer for s in samples) / len(samples)


def _token_at(tokens: Sequence[TokenLogprob], offset: int) -> TokenLogprob | None:
    pos = 0
    for t in tokens:
        if pos <= offset < pos + len(t.token):
            return t
        pos += len(t.token)
    return None


def _letter(token: str, options: dict[str, str]) -> str | None:
    core = token.strip(_AROUND)
    return core if core in options else None
