"""Agent wording for the patient validation: each physician question asked again by the agent's model.

The replay patient is validated on the physicians' own questions and on another physician's closest
question (``patient_validation.probes``). An agent words its questions differently: complete sentences, no
fillers, often two questions in one ("Do you smoke cigarettes or drink alcohol?"). ``reword`` asks the
agent's model, with the agent's own system message (``history_reword``), to ask for what each recorded
question asks for; the recorded answer stays the gold, so a patient's false "I don't know" to agent wording
can be counted.

Rewordings are cached in one JSON file per model (``RewordCache``): the probes of a rerun are the same, and
a run cut short resumes. A reply that stays malformed after its retry is recorded and its probe left out
(counted by the caller), never replaced by the original wording.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import field_validator

from medagent.history.agent.policy import spoken_question
from medagent.llm.base import ChatModel
from medagent.llm.structured import Output, ask, capped_str
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt

PROMPT = "history_reword"


class Reworded(Output):
    """The ``history_reword`` reply, held to the agent's own rule for a question (``spoken_question``)."""

    question: capped_str(240)  # type: ignore[valid-type]

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        return spoken_question(value)


@dataclass
class RewordCache:
    """Rewordings of one model and prompt version, kept in ``path`` (JSON: question -> rewording)."""

    path: Path
    items: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, root: Path, model: str) -> RewordCache:
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in model)
        path = Path(root) / f"{PROMPT}-v{load_prompt(PROMPT).version}-{name}.json"
        items = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        return cls(path, dict(items))

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.items, indent=1, ensure_ascii=False), encoding="utf-8")
        tmp.replace(self.path)


async def reword(
    llm: ChatModel,
    questions: Sequence[str],
    cache: RewordCache,
    *,
    json_schema_ok: bool = True,
    concurrency: int = 2,
    usage: UsageRecord | None = None,
    save_every: int = 20,
    on_done: Callable[[int], None] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """The agent's wording of each of ``questions`` (those already in ``cache`` are not asked again), and
    the errors of the questions left without one. ``on_done(n_to_ask)`` is called as each asked question
    ends (a progress bar).

    Raises:
        LLMError: The endpoint failed (what was reworded before it is saved).
    """
    template = load_prompt(PROMPT)
    gate = asyncio.Semaphore(max(1, concurrency))
    todo = [q for q in dict.fromkeys(questions) if q not in cache.items]
    errors: list[str] = []
    done = 0

    async def one(q: str) -> None:
        nonlocal done
        async with gate:
            reply = await ask(
                llm,
                template.render(question=q),
                Reworded,
                prompt=PROMPT,
                json_schema_ok=json_schema_ok,
                tag="reword",
                usage=usage,
                max_tokens=96,
                max_retries=1,
            )
        if on_done is not None:
            on_done(len(todo))
        if reply.value is None:
            errors.append(f"{q[:80]!r}: " + "; ".join(reply.errors)[:200])
            return
        cache.items[q] = reply.value.question
        done += 1
        if done % save_every == 0:
            cache.save()

    # A failed endpoint ends the run: the questions still waiting are cancelled, not asked of it.
    tasks = [asyncio.ensure_future(one(q)) for q in todo]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        raise
    finally:
        cache.save()
    return {q: cache.items[q] for q in questions if q in cache.items}, errors
