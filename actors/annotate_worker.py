"""Ray Data callable class that runs the LLM annotator on batches of interviews.

One long-lived actor holds the LLM client and the annotator (its lexicons arrive built, from the driver);
it annotates the interviews of a batch concurrently on its own event loop. A model's mistakes and endpoint
failures are recorded in each ``Annotation.errors`` by the annotator itself; any other exception is a bug
and propagates.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from actors.common import chat_model_for, validate_columns
from medagent.config import AnnotatorConfig, LLMConfig, to_dataclass
from medagent.interview.annotate.llm import LLMAnnotator
from medagent.interview.annotate.matcher import Lexicon
from medagent.interview.transcripts import Interview
from medagent.interview.types import Annotation
from medagent.llm.base import ChatModel
from medagent.llm.endpoints import LLMEndpoint

REQUIRED_INPUT_KEYS = ("id", "role", "interview")


def validate_inputs(batch: dict[str, Any], stage: str = "AnnotateWorker") -> None:
    validate_columns(batch, REQUIRED_INPUT_KEYS, stage)


class AnnotateWorker:
    """``map_batches`` UDF: ``id``, ``role``, ``interview`` (JSON of an ``Interview``) -> ``id``, ``role``, ``annotation``.

    Args:
        annotator: ``AnnotatorConfig`` as a dict.
        llm: ``LLMConfig`` as a dict.
        llm_endpoint: Where the LLM is (``actors.backends.llm_endpoint``).
        symptoms: The symptom lexicon (built once at the driver from the ontology).
        diseases: The disease lexicon.
    """

    def __init__(
        self,
        annotator: dict[str, Any],
        llm: dict[str, Any],
        llm_endpoint: LLMEndpoint,
        symptoms: Lexicon,
        diseases: Lexicon,
    ) -> None:
        self.cfg: AnnotatorConfig = to_dataclass(AnnotatorConfig, annotator)
        self.llm_cfg: LLMConfig = to_dataclass(LLMConfig, llm)
        self.endpoint = llm_endpoint
        # A private loop in a daemon thread: map_batches calls __call__ synchronously, and the client and
        # Serve handle must live on one loop across batches.
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, name="annotate-loop", daemon=True).start()
        chat = asyncio.run_coroutine_threadsafe(self._client(), self._loop).result()
        self.annotator = LLMAnnotator(
            chat, self.cfg, symptoms, diseases, json_schema=self.llm_cfg.supports_json_schema
        )
        self._sem = asyncio.Semaphore(self.cfg.max_concurrency)

    async def _client(self) -> ChatModel:
        return chat_model_for(self.llm_cfg, self.endpoint)

    async def _one(self, interview: Interview) -> Annotation:
        async with self._sem:
            return await self.annotator.annotate(interview)

    async def _run(self, interviews: list[Interview]) -> list[Annotation]:
        return list(await asyncio.gather(*(self._one(iv) for iv in interviews)))

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        import json

        validate_inputs(batch)
        interviews = [Interview.from_json(s) for s in batch["interview"]]
        annotations = asyncio.run_coroutine_threadsafe(self._run(interviews), self._loop).result()
        return {
            "id": list(batch["id"]),
            "role": list(batch["role"]),
            "annotation": [json.dumps(a.to_dict(), ensure_ascii=False) for a in annotations],
        }
