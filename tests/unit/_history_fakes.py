"""Fakes for the history-taking tests: a scripted clinician model, a scripted patient, a bag-of-words embedder."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from medagent.history.agent.state import SLOT_BY_NAME
from medagent.services import Doc
from tests.fakes import ScriptedChatModel, completion

_STOP = {"the", "a", "an", "you", "your", "any", "to", "do", "have", "about", "me", "tell", "could", "of"}

EQUAL_DX = [
    {"diagnosis": "viral URTI", "probability": 0.34, "reason": "cough"},
    {"diagnosis": "COVID-19", "probability": 0.33, "reason": "season"},
    {"diagnosis": "pneumonia", "probability": 0.33, "reason": "fever"},
]


class BagOfWordsEmbedder:
    """Cosine of bag-of-words vectors (stop words dropped): word order does not matter, wording does."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), 256), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                if w not in _STOP:
                    out[i, self.vocab.setdefault(w, len(self.vocab) % 256)] += 1
        return out


def _user(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"]) if body["messages"] else ""


class FakeClinician:
    """A scripted model that plays every history-taking role, keyed on the request's prompt tag.

    * update: fills the slot named in the doctor's question (``about <slot>``; the opening question fills
      ``symptom``) with the patient's answer, quoted, unless it says "don't know"; a red flag when the answer
      mentions blood; the differential from ``differential(turn)``.
    * question: ``Could you tell me about <slot>?`` for the target slot (``question_override`` can replace it).
    * summary / assessment: fixed replies citing the first passage given (and a bogus id).
    """

    def __init__(
        self,
        differential: Callable[[int], list[dict[str, Any]]] = lambda turn: EQUAL_DX,
        question_override: Callable[[str, str], dict[str, Any] | str | None] | None = None,
        update_override: Callable[[int], str | None] | None = None,
        assessment_reply: str | None = None,
    ) -> None:
        self.differential = differential
        self.question_override = question_override
        self.update_override = update_override
        self.assessment_reply = assessment_reply
        self.updates = 0
        self.confirmations = 0
        self.model = ScriptedChatModel(self)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("prompt")
        if name == "history_update":
            return completion(self._update(body))
        if name == "history_question":
            return completion(self._question(body))
        if name == "clinical_summary":
            return completion(json.dumps({"summary": "Adult with cough and fever for three days."}))
        if name == "history_assessment":
            return completion(self.assessment_reply or self._assessment(body))
        raise AssertionError(f"unexpected request {name!r}")

    def _update(self, body: dict[str, Any]) -> str:
        turn = self.updates
        self.updates += 1
        if self.update_override is not None and (reply := self.update_override(turn)) is not None:
            return reply
        user = _user(body)
        question = re.search(r"^Doctor: (.*)$", user, re.M)
        answer = re.search(r"^Patient: (.*)$", user, re.M)
        q = question.group(1) if question else ""
        a = answer.group(1) if answer else ""
        m = re.search(r"about (\w+)[?:]", q)
        slot = m.group(1) if m else ("symptom" if "brings you in" in q else None)
        facts = (
            [{"slot": slot, "value": a, "quote": a}]
            if slot in SLOT_BY_NAME and "don't know" not in a.lower()
            else []
        )
        return json.dumps(
            {
                "summary_add": f"Turn {turn}.",
                "slot_updates": facts,
                "differential": self.differential(turn),
                "red_flags": [{"id": "haemoptysis", "quote": a}] if "blood" in a.lower() else [],
                "route": "question",
            }
        )

    def _question(self, body: dict[str, Any]) -> str:
        user = _user(body)
        target = re.search(r"^Ask about: (\w+) ", user, re.M)
        slot = target.group(1) if target else "other"
        if self.question_override is not None:
            override = self.question_override(slot, user)
            if isinstance(override, str):
                return override
            if override is not None:
                return json.dumps(override)
        if slot == "other":
            topics = ["night sweats", "weight loss", "chest pain", "a rash", "headaches", "vomiting"]
            topic = topics[self.confirmations % len(topics)]
            self.confirmations += 1
            return json.dumps({"question": f"Have you noticed {topic}?", "slot": "other"})
        finding = re.search(r"specifically: ([^.]+)\.$", user, re.M)
        if finding:  # the information policy's scored finding
            return json.dumps(
                {"question": f"Could you tell me about {slot}: any {finding.group(1)}?", "slot": slot}
            )
        return json.dumps({"question": f"Could you tell me about {slot}?", "slot": slot})

    def _assessment(self, body: dict[str, Any]) -> str:
        ids = re.findall(r"<<<PASSAGE id=(\S+)", _user(body))
        return json.dumps(
            {
                "statement": "This is most likely a viral infection; we will do a covid swab and you should rest.",
                "differential": [
                    {
                        "diagnosis": "COVID-19",
                        "reason": "fever and cough",
                        "citations": [*ids[:1], "bogus-id"],
                    },
                    {"diagnosis": "viral URTI", "reason": "mild", "citations": []},
                ],
                "next_steps": ["covid swab"],
                "red_flags": [],
            }
        )


class ScriptedPatient:
    """Answers ``... about <slot>?`` from a table; the opening question gets ``opening``."""

    def __init__(
        self, answers: dict[str, str] | None = None, opening: str = "I have a cough and a fever."
    ) -> None:
        self.answers = answers or {}
        self.opening = opening
        self.questions: list[str] = []

    async def answer(self, question: str) -> str:
        self.questions.append(question)
        if "brings you in" in question:
            return self.opening
        m = re.search(r"about (\w+)[?:]", question)
        if m:
            return self.answers.get(m.group(1), f"My {m.group(1)} is fine.")
        return "I'm not sure."


class FakeRetriever:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def retrieve(
        self,
        query: str,
        top_k: int,
        *,
        sources: list[str] | None = None,
        mode: str | None = None,
        return_parents: bool | None = None,
    ) -> list[Doc]:
        self.calls.append(
            {
                "query": query,
                "top_k": top_k,
                "sources": sources,
                "mode": mode,
                "return_parents": return_parents,
            }
        )
        return [
            Doc(
                id="g1#p0",
                source="guidelines",
                title="Acute cough",
                content="Test for COVID-19.",
                doc_id="g1",
            ),
            Doc(id="g2#p3", source="guidelines", title="Pneumonia", content="Chest X-ray.", doc_id="g2"),
        ]
