"""A terminal rendering of one answered question: its steps, its answer and the evidence it cites.

Used at the end of ``pipelines.run_benchmark`` (one example per run) so a user sees what the agent did
without opening ``traces/<id>.json``. Pure formatting over the trace dicts: any step kind renders.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from medagent.types import Gold, Prediction, Question

_STEP_FIELDS = ("tool", "name")


def _short(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def format_step(step: dict[str, Any], width: int = 100) -> str:
    """``#3 tool_call enable_search {"query": ...}  1.20s 512+40 tok``."""
    head = f"#{step.get('step', '?')} {step.get('kind', 'step')}"
    name = next((str(step[k]) for k in _STEP_FIELDS if step.get(k)), "")
    args = step.get("arguments") or step.get("args")
    body = " ".join(x for x in (name, _short(args, 60) if args else "") if x)
    if step.get("kind") == "gate":  # the gated agent's decision (medagent.agent.gated)
        conf = step.get("confidence")
        body = (
            f"{step.get('decision')}: confidence {'n/a' if conf is None else f'{conf:.2f}'} ({step.get('method')}) "
            f"vs {step.get('threshold')}; first answer {step.get('first_answer')}, tools {step.get('tools_answer')}"
        )
    result = step.get("result") or step.get("observation") or step.get("summary")
    cost = []
    if step.get("latency_s") is not None:
        cost.append(f"{float(step['latency_s']):.2f}s")
    if step.get("prompt_tokens") is not None:
        cost.append(f"{step.get('prompt_tokens', 0)}+{step.get('completion_tokens', 0)} tok")
    line = f"{head} {body}".rstrip() + (f"  [{', '.join(cost)}]" if cost else "")
    if result:
        line += "\n      -> " + _short(result, width - 9)
    # A search's documents (medagent.agent.provenance; absent from older traces): handle, source:id, scores.
    docs = step.get("retrieved_docs") or []
    if docs:
        shown = [
            f"{d.get('handle') or '-'} {d.get('source')}:{d.get('id')} ({_score(d.get('first_stage_score'))}"
            f" -> {_score(d.get('rerank_score'))})"
            for d in docs
        ]
        line += "\n      docs: " + _short(", ".join(shown), width - 12)
    return line


def _score(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.3g}"


def format_example(question: Question, pred: Prediction, gold: Gold | None = None, width: int = 100) -> str:
    """The question, every trace step, the answer (and the gold, for the reader) and cited evidence."""
    lines = [f"question {question.id} ({question.benchmark})"]
    lines += textwrap.wrap(question.text, width, initial_indent="  ", subsequent_indent="  ")[:6]
    for key, text in sorted((question.options or {}).items()):
        lines.append(f"  {key}. {_short(text, width - 5)}")
    lines.append(f"trace: {len(pred.trace)} steps")
    lines += ["  " + format_step(s, width - 2) for s in pred.trace]
    verdict = ""
    if gold is not None and gold.answer:
        verdict = "  (correct)" if pred.answer == gold.answer else f"  (gold: {gold.answer})"
    lines.append(
        f"answer: {_short(pred.answer, width - 8)}{verdict}"
        + (f"  error: {pred.error}" if pred.error else "")
    )
    if pred.evidence:
        lines.append(f"evidence cited: {len(pred.evidence)}")
        for ev in pred.evidence:
            doc = str(ev.get("doc_id") or ev.get("id", "?"))
            source = str(ev.get("source", "?"))
            where = f"[{doc}]" if doc.startswith(f"{source}:") else f"[{source}:{doc}]"
            flag = "" if ev.get("verified", True) else " (quote not found in the document)"
            quote = _short(ev.get("quote") or ev.get("span") or "", width - len(where) - 5)
            lines.append(f'  {where} "{quote}"{flag}')
    else:
        lines.append("evidence cited: none")
    usage = pred.usage
    if usage:
        lines.append("usage: " + ", ".join(f"{k}={v}" for k, v in usage.items()))
    return "\n".join(lines)
