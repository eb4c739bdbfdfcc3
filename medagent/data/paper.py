"""The QA paper's item sets (Jia et al.): the questions its numbers resolve to, as its lab's public files give them.

Every USMLE accuracy in the paper is a count over 94 / 109 / 122 items (82.98 % = 78/94, 86.24 % = 94/109,
88.52 % = 108/122), not over the merged sample releases (``usmle_step1`` etc., 325 / 407 / 239). The items
were transcribed from the lab's stored model inputs (``usmle_paper/SOURCE.md``); their text differs from
the merged files in places, and 40 items are in no other file, so these loaders read ``usmle_paper/`` only.

MedQA: the lab's ``Benchmark_processed/MedQA_clean.json`` (``vkola-lab/pdig2026``) holds the same 1,273
test questions as ``medqa_us/`` in the same order (first and last items compared; the file's size matches a
re-serialisation of ours to 0.3 %), so ``medqa_paper`` reads the same file under the paper's name.

MedExpQA: the lab's ``MedExpQA_clean.json`` keeps option ``E: "None"`` on 67 of 125 items, but the options
its models were shown (the ``option`` strings of ``processed_data/*/extracted_*_MedExpQA.json``) list only
A-D on those items and drop each option's final period ("Marfan syndrome." is shown as "Marfan syndrome").
``medexpqa_paper`` shows the options that way; no gold answer is "E: None".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from medagent.data.base import LoadContext, register_benchmark
from medagent.data.loaders import _enumerate, _read_json, load_medexpqa, load_medqa
from medagent.data.validate import RawRow

USMLE_PAPER_DIR = "usmle_paper"
# The paper's counts, checked by the tests and printed beside the merged sets' (medagent.data.counts).
PAPER_COUNTS = {
    "usmle_step1_paper": 94,
    "usmle_step2_paper": 109,
    "usmle_step3_paper": 122,
    "medqa_paper": 1273,
    "medexpqa_paper": 125,
}
# The paper's item set for each merged (or already matching) benchmark.
PAPER_SETS = {
    "usmle_step1": "usmle_step1_paper",
    "usmle_step2": "usmle_step2_paper",
    "usmle_step3": "usmle_step3_paper",
    "medqa": "medqa_paper",
    "medexpqa": "medexpqa_paper",
}


def paper_item_id(benchmark: str, index: int) -> str:
    """The id of a paper item: its position in the lab's file, so per-item reference answers join on it."""
    return f"{benchmark.removesuffix('_paper')}-paper-{index}"


def item_index(question_id: str) -> int | None:
    """The lab-file position inside a paper item's id (None for any other id)."""
    head, sep, tail = question_id.rpartition("-paper-")
    return int(tail) if sep and head and tail.isdigit() else None


def _usmle_paper_loader(name: str, step: int) -> None:
    def to_row(position: int, item: dict[str, Any]) -> dict[str, Any]:
        index = item.get("index", position)
        keep = (
            "release",
            "release_question_number",
            "podgpt_source",
            "podgpt_question_number",
            "podgpt_match",
        )
        return {
            "id": paper_item_id(name, index) if isinstance(index, int) else None,
            "question": item.get("question"),
            "options": item.get("options"),
            "answer": item.get("answer"),
            "metadata": {"index": index, **{k: item.get(k) for k in keep}},
        }

    @register_benchmark(name)
    def load(ctx: LoadContext) -> Iterator[RawRow]:
        path = ctx.file(f"{USMLE_PAPER_DIR}/usmle_step{step}.json")
        items = _read_json(path)
        if not isinstance(items, list):
            raise ValueError(f"{path}: expected a JSON array of questions")
        return _enumerate(items, to_row)

    load.__name__ = f"load_{name}"
    load.__doc__ = (
        f"The QA paper's USMLE Step {step} items ({PAPER_COUNTS[name]}); ids ``{name}``'s positions."
    )


for _step in (1, 2, 3):
    _usmle_paper_loader(f"usmle_step{_step}_paper", _step)


@register_benchmark("medqa_paper")
def load_medqa_paper(ctx: LoadContext) -> Iterator[RawRow]:
    """MedQA as the paper's lab gives it: the 1,273 test questions of ``medqa_us`` (see the module docs)."""
    return load_medqa(ctx)


def _shown_as_paper(row: RawRow) -> RawRow:
    data = row.data
    if row.error is not None or not isinstance(data, dict) or not isinstance(data.get("options"), dict):
        return row
    options = {
        k: v.rstrip().removesuffix(".") if isinstance(v, str) else v for k, v in data["options"].items()
    }
    answer = data.get("answer")
    text = options.get(answer) if isinstance(answer, str) else data.get("answer_text")
    return RawRow(row.row, {**data, "options": options, "answer_text": text})


@register_benchmark("medexpqa_paper")
def load_medexpqa_paper(ctx: LoadContext) -> Iterator[RawRow]:
    """MedExpQA's 125 English test items as the paper's lab showed them: no ``E: "None"``, no final period."""
    return (_shown_as_paper(row) for row in load_medexpqa(ctx))
