"""One usage record for every agent: the keys it writes, sums, and the older history keys it still reads."""

from __future__ import annotations

from medagent.llm.base import ChatResponse, Usage
from medagent.llm.usage import UsageRecord, call_kind


def test_the_record_writes_only_what_an_agent_counts_in_one_order() -> None:
    assert UsageRecord(prompt_tokens=50, completion_tokens=4).to_dict() == {
        "prompt_tokens": 50,
        "completion_tokens": 4,
    }
    full = UsageRecord(1, 2, 3, 0.25, 4, 5, 0.5).to_dict()
    assert list(full) == [
        "prompt_tokens", "completion_tokens", "llm_calls", "llm_ms", "tool_calls", "retrieval_calls", "retrieval_ms"
    ]  # fmt: skip
    engine = UsageRecord(1, 2, 3, 0.25, cached_tokens=1, evaluated_tokens=0, prompt_s=0.01, decode_s=0.2)
    assert list(engine.to_dict()) == [
        "prompt_tokens", "cached_tokens", "evaluated_tokens", "completion_tokens", "llm_calls", "llm_ms",
        "prompt_ms", "decode_ms",
    ]  # fmt: skip
    assert UsageRecord.from_dict(engine.to_dict()) == engine
    assert full["llm_ms"] == 250 and full["retrieval_ms"] == 500
    assert UsageRecord.from_dict(full) == UsageRecord(1, 2, 3, 0.25, 4, 5, 0.5)


def test_calls_are_counted_by_kind_and_sum() -> None:
    log = UsageRecord.calls(by_tag=True)
    log.add(Usage(10, 2), 0.1, "turn 3 question (onset)")
    log.add(Usage(5, 1), 0.2, "turn 3 update")
    d = log.to_dict()
    assert d["llm_calls"] == 2 and d["llm_ms"] == 300 and set(d["by_tag"]) == {"question", "update"}
    assert d["by_tag"]["question"] == {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "llm_calls": 1,
        "llm_ms": 100,
    }
    tools = UsageRecord(prompt_tokens=1, completion_tokens=1, llm_calls=1, llm_s=0.0, tool_calls=2)
    first = UsageRecord.of_responses([ChatResponse("", usage=Usage(3, 1), latency_s=0.5)])
    total = (first + tools).to_dict()
    assert total == {
        "prompt_tokens": 4,
        "completion_tokens": 2,
        "llm_calls": 2,
        "llm_ms": 500,
        "tool_calls": 2,
    }
    assert call_kind("red flags (turns 1-9)") == "red flags"


def test_old_history_rows_still_read() -> None:
    old = {
        "calls": 3,
        "prompt_tokens": 30,
        "completion_tokens": 6,
        "latency_s": 1.5,
        "by_tag": {"patient": {"calls": 3, "prompt_tokens": 30, "completion_tokens": 6, "latency_s": 1.5}},
        "errors": ["simulator: empty reply"],
    }
    u = UsageRecord.from_dict(old)
    assert u.llm_calls == 3 and u.llm_s == 1.5 and u.by_tag is not None
    assert u.by_tag["patient"].llm_calls == 3 and u.by_tag["patient"].llm_s == 1.5
    assert UsageRecord.from_dict(None) == UsageRecord() and UsageRecord().to_dict() == {}


def test_engine_figures_are_summed_where_reported_and_none_where_not() -> None:
    log = UsageRecord.calls(by_tag=True)
    log.add(
        Usage(100, 10, cached_tokens=60, evaluated_tokens=40, prompt_ms=400.0, decode_ms=900.0), 1.5, "agent"
    )
    log.add(
        Usage(120, 5, cached_tokens=100, evaluated_tokens=20, prompt_ms=200.0, decode_ms=450.0), 0.7, "agent"
    )
    log.add(Usage(50, 3), 0.2, "perform_comparison")
    d = log.to_dict()
    assert (d["cached_tokens"], d["evaluated_tokens"], d["prompt_ms"], d["decode_ms"]) == (160, 60, 600, 1350)
    assert log.hit_rate == 160 / 270
    # A backend that reports no cache figures leaves them uncounted, not zero.
    assert "cached_tokens" not in d["by_tag"]["perform_comparison"]
    assert d["by_tag"]["agent"]["evaluated_tokens"] == 60
    assert UsageRecord.calls().hit_rate is None
