"""Fact extraction: one structured model call per excerpt of the patient's turns, once per interview.

The visible interview (the physician's closing statement excluded) is cut into excerpts of whole exchanges
(a doctor's question with the patient's answer) of at most ``chunk_chars`` characters, so a 4k-token CPU
model sees each in one request; the doctor's words are there only so the patient's short answers ("no",
"about a week") can be read. Each excerpt's reply (``history_facts``: category, statement, polarity,
quote) goes through ``store.accept``: a fact is kept only with a quote found in a patient turn. The fact
set is cached (``store.FactCache``) by transcript, model and prompt version, so the arms of an experiment
share one set and a rerun costs no model call.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator

from medagent.history.facts.store import CATEGORIES, POLARITIES, FactCache, FactSet, accept, cache_key
from medagent.history.simulation.reference import exchanges
from medagent.interview.types import Turn
from medagent.llm.base import ChatModel
from medagent.llm.structured import Output, ask, capped_list, capped_str, enum_str
from medagent.llm.usage import UsageRecord
from medagent.prompts import load_prompt

PROMPT = "history_facts"
# With the schema's grammar the list closes after this many items, so a reply fits its token cap (an item
# is ~50-90 tokens; 8 x 90 < 768): a small model that repeats one item until the cap otherwise leaves
# truncated JSON, and its retry tends to list nothing. An excerpt of ~1,200 characters (a few exchanges)
# rarely holds more.
MAX_FACTS_PER_EXCERPT = 8


class FactItem(Output):
    """One extracted fact as the model writes it; ``accept`` checks the values (an unknown category is set
    aside there, with its reason, rather than failing the excerpt)."""

    category: Annotated[enum_str(CATEGORIES), BeforeValidator(str)]  # type: ignore[valid-type]
    statement: Annotated[capped_str(80), BeforeValidator(str)]  # type: ignore[valid-type]
    polarity: Annotated[enum_str(POLARITIES), BeforeValidator(str)]  # type: ignore[valid-type]
    quote: Annotated[capped_str(200), BeforeValidator(str)]  # type: ignore[valid-type]


def _items(value: Any) -> Any:
    """Keep the dict items of a list; a small model's stray strings are not facts."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else value


class FactsReply(Output):
    facts: Annotated[capped_list(FactItem, MAX_FACTS_PER_EXCERPT), BeforeValidator(_items)]  # type: ignore[valid-type]


def excerpts(turns: Sequence[Turn], chunk_chars: int) -> list[str]:
    """The exchanges of ``turns`` packed in order into excerpts of at most ``chunk_chars`` characters (an
    exchange longer than that is its own excerpt)."""
    out: list[str] = []
    for x in exchanges(list(turns)):
        if out and len(out[-1]) + 1 + len(x) <= chunk_chars:
            out[-1] += "\n" + x
        else:
            out.append(x)
    return out


def prompt_id() -> str:
    return f"{PROMPT}@v{load_prompt(PROMPT).version}"


async def extract_facts(
    llm: ChatModel,
    interview_id: str,
    turns: Sequence[Turn],
    *,
    model: str,
    chunk_chars: int = 1200,
    max_tokens: int = 768,
    json_schema: bool = True,
    cache: FactCache | None = None,
    usage: UsageRecord | None = None,
    concurrency: int = 2,
) -> FactSet:
    """The fact set of one interview's visible ``turns``: read from ``cache`` when there, else extracted
    (module docstring) and written there.

    Args:
        llm: The extracting model.
        model: Its name, part of the cache key (the endpoint does not always report it).
        chunk_chars: Excerpt size (characters).
        concurrency: Excerpts asked at once (the CPU server's slots; more queue there).

    Raises:
        LLMError: The endpoint failed; nothing is cached.
    """
    key = cache_key(turns, model, prompt_id())
    run = functools.partial(
        _extract, llm, interview_id, turns, key, model, chunk_chars, max_tokens, json_schema, usage, concurrency
    )  # fmt: skip
    if cache is None:
        return await run()
    if (hit := cache.get(interview_id, key)) is not None:
        return hit
    # Arms of one interview can run at once: on one worker they share one extraction task (and its error);
    # workers in other processes wait on a lock file and read the set the first one wrote. The task, not a
    # caller, does the work, so a caller that is cancelled leaves the others their extraction.
    flight = (str(cache.path(interview_id, key)), key)
    task = _IN_FLIGHT.get(flight)
    if task is None:
        task = asyncio.ensure_future(_extract_to_cache(cache, interview_id, key, run))
        _IN_FLIGHT[flight] = task
        task.add_done_callback(lambda t: _landed(flight, t))
    return await asyncio.shield(task)


# Extractions under way in this process, by (cache file, key): see ``extract_facts``.
_IN_FLIGHT: dict[tuple[str, str], asyncio.Task[FactSet]] = {}


def _landed(flight: tuple[str, str], task: asyncio.Task[FactSet]) -> None:
    _IN_FLIGHT.pop(flight, None)
    if not task.cancelled():
        task.exception()  # retrieved, so an extraction every caller left logs no "never retrieved"


@contextlib.asynccontextmanager
async def _locked(path: Path, poll_s: float = 0.5) -> AsyncIterator[None]:
    """An exclusive ``flock`` on ``path`` across processes, waited for without blocking the event loop."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(poll_s)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


async def _extract_to_cache(
    cache: FactCache, interview_id: str, key: str, run: Callable[[], Awaitable[FactSet]]
) -> FactSet:
    target = cache.path(interview_id, key)
    async with _locked(target.with_name(target.name + ".lock")):
        # Another process may have written the set while this one waited for the lock.
        if (hit := cache.get(interview_id, key)) is not None:
            return hit
        fs = await run()
        cache.put(fs)
        return fs


async def _extract(
    llm: ChatModel,
    interview_id: str,
    turns: Sequence[Turn],
    key: str,
    model: str,
    chunk_chars: int,
    max_tokens: int,
    json_schema: bool,
    usage: UsageRecord | None,
    concurrency: int,
) -> FactSet:
    fs = FactSet(interview_id, key, model, prompt_id())
    template = load_prompt(PROMPT)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(excerpt: str) -> Any:
        async with gate:
            return await ask(
                llm,
                template.render(excerpt=excerpt),
                FactsReply,
                prompt=PROMPT,
                schema_name="facts",
                json_schema_ok=json_schema,
                tag="fact extraction",
                usage=usage,
                max_tokens=max_tokens,
                max_retries=1,
            )

    # The excerpts are independent: asked at once (up to ``concurrency``), read in order. A failed one ends
    # the extraction, and the others are cancelled rather than asked of a failing endpoint.
    tasks = [asyncio.ensure_future(one(e)) for e in excerpts(turns, chunk_chars)]
    try:
        replies = await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        raise
    for i, reply in enumerate(replies):
        if reply.value is None:
            fs.errors.append(f"excerpt {i}: " + "; ".join(reply.errors)[:300])
            continue
        if reply.errors:
            # A retry that "recovers" can do so by listing nothing (a small model that looped until its
            # token cap, asked again, replies {"facts": []}): the excerpt's facts are then missing too.
            kept = len(reply.value.facts)
            fs.errors.append(f"excerpt {i}: retried ({kept} facts after): " + "; ".join(reply.errors)[:300])
        accept(interview_id, [f.model_dump() for f in reply.value.facts], turns, fs)
    fs.facts.sort(key=lambda f: f.turn)
    return fs
