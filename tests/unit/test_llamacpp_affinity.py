"""Slot affinity on the llama.cpp engine: a conversation keeps its slot, new conversations spread over the
slots, and the engine sends ``id_slot`` only when the config asks for it."""

from __future__ import annotations

from typing import Any

from medagent.config import LLMConfig
from medagent.llm.llamacpp import LlamaCppEngine, LlamaCppSettings, SlotMap, llamacpp_settings


def _conversation(i: int, turns: int = 1) -> list[dict[str, Any]]:
    messages = [{"role": "system", "content": "instructions"}, {"role": "user", "content": f"question {i}"}]
    for t in range(turns - 1):
        messages += [
            {"role": "assistant", "content": f"call {t}"},
            {"role": "user", "content": f"result {t}"},
        ]
    return messages


def test_a_conversation_keeps_its_slot_and_new_ones_take_the_least_used() -> None:
    slots = SlotMap(4)
    first = [slots.slot(_conversation(i)) for i in range(8)]
    assert sorted(first) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [slots.slot(_conversation(i, turns=3)) for i in range(8)] == first


class _Server:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def handle_chat_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        return {"choices": [{"message": {"content": "ok"}}]}


def _engine(affinity: bool) -> tuple[LlamaCppEngine, _Server]:
    engine = LlamaCppEngine.__new__(LlamaCppEngine)  # the real server needs a model file
    server = _Server()
    engine._server, engine.model = server, "m"
    engine._slot_map = SlotMap(2) if affinity else None
    return engine, server


def test_the_engine_pins_only_when_asked() -> None:
    engine, server = _engine(affinity=True)
    engine.complete_sync({"messages": _conversation(0)})
    engine.complete_sync({"messages": _conversation(1)})
    engine.complete_sync({"messages": _conversation(0, turns=2)})
    assert [b["id_slot"] for b in server.bodies] == [0, 1, 0]
    engine, server = _engine(affinity=False)
    engine.complete_sync({"messages": _conversation(0)})
    assert "id_slot" not in server.bodies[0]


def test_the_config_reaches_the_engine_settings() -> None:
    s = llamacpp_settings(
        LLMConfig(n_ctx=32768, n_parallel=4, slot_affinity=True, engine_kwargs={"n_batch": 512})
    )
    assert s == LlamaCppSettings(
        n_ctx=32768, n_parallel=4, slot_affinity=True, engine_kwargs={"n_batch": 512}
    )


def test_speculative_decoding_is_a_setting_and_an_unknown_kind_is_refused() -> None:
    import pytest

    assert llamacpp_settings(LLMConfig(speculative="ngram_mod")).speculative == "ngram_mod"
    # Refused before any model is read (the path does not exist).
    with pytest.raises(ValueError, match=r"llm.speculative must be one of .*ngram_mod.*'ngram'"):
        LlamaCppEngine("/nonexistent.gguf", LlamaCppSettings(speculative="ngram"))
