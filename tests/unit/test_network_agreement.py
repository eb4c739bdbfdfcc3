"""Cohen's kappa of two annotators: the formula, the items of each unit, and the two inputs of the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medagent.interview.types import Annotation, QuestionAnnotation
from medagent.network.agreement import agreement, cohen_kappa, main, read_annotations


def test_kappa_matches_the_textbook_example() -> None:
    # 50 items: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no -> p_o 0.7, p_e 0.5, kappa 0.4.
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    kappa, p_o, p_e = cohen_kappa(a, b)
    assert (kappa, p_o, p_e) == pytest.approx((0.4, 0.7, 0.5))
    assert cohen_kappa(["x", "x"], ["x", "x"])[0] == 1.0


def _ann(i: str, who: str, qs: list[tuple[int, str]], pos: list[str], neg: list[str]) -> Annotation:
    return Annotation(i, "fareez", who, pos, neg, [], [QuestionAnnotation(t, "?", c) for t, c in qs])


def test_units_are_questions_and_mentioned_findings(tmp_path: Path) -> None:
    lex = {"A": _ann("A", "lexicon", [(0, "symptom"), (2, "habit")], ["cough"], ["fever"])}
    llm = {
        "A": _ann("A", "llm", [(0, "symptom"), (4, "travel")], ["cough", "fever"], []),
        "B": _ann("B", "llm", [(0, "symptom")], [], []),  # not in both: left out
    }
    q, f = agreement(lex, llm)
    assert q.n_interviews == 1 and q.n_items == 3  # turns 0, 2, 4; one agreement
    assert q.observed == pytest.approx(1 / 3)
    assert f.n_items == 2 and f.observed == pytest.approx(0.5)  # cough agrees, fever +/- differs
    path = tmp_path / "llm.jsonl"
    path.write_text("\n".join(json.dumps(a.to_dict()) for a in llm.values()) + "\n")
    assert set(read_annotations(path)) == {"A", "B"}


def test_the_cli_reads_two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = tmp_path / "a.jsonl"
    a.write_text(json.dumps(_ann("A", "lexicon", [(0, "symptom")], ["cough"], []).to_dict()) + "\n")
    main([str(a), str(a)])
    out = json.loads(capsys.readouterr().out)
    assert [r["kappa"] for r in out] == [1.0, 1.0]
