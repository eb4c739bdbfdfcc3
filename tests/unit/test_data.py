"""Benchmark loading: counts on the real data, USMLE option parsing, filters, and the shared validator."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from medagent.data import (
    BenchmarkData,
    list_benchmarks,
    load_benchmark,
    register_benchmark,
    registry,
    resolve_data_root,
)
from medagent.data.loaders import parse_choices
from medagent.data.paper import PAPER_COUNTS, item_index
from medagent.data.validate import RAW_LIMIT, RawRow, validate_row
from medagent.types import Gold, Rejected


@pytest.fixture(scope="module")
def data_root() -> Path:
    try:
        return resolve_data_root(None)
    except FileNotFoundError as exc:
        pytest.skip(f"shared data not available: {exc}")


def _load(name: str, root: Path, **options: Any) -> BenchmarkData:
    return load_benchmark(name, data_root=root, **options)


# ---------------------------------------------------------------- real data: counts


@pytest.mark.parametrize(
    ("name", "n_valid", "n_files"),
    [
        ("usmle_step1", 325, 1),
        ("usmle_step2", 407, 1),
        ("usmle_step3", 239, 1),
        ("usmle_ethics", 65, 1),
        ("medqa", 1273, 1),
        ("medexpqa", 125, 2),
        ("pubmedqa", 500, 1),
        ("bioasq", 618, 25),
    ],
)
def test_real_counts(data_root: Path, name: str, n_valid: int, n_files: int) -> None:
    data = _load(name, data_root)
    assert data.name == name
    assert len(data.pairs) == n_valid
    assert data.rejected == []  # every shipped row is valid, and no id repeats
    assert len({q.id for q, _ in data.pairs}) == n_valid
    assert all(q.id == g.id and q.benchmark == name for q, g in data.pairs)
    assert all(
        g.answer in (q.options or {}) and g.answer_text == (q.options or {})[g.answer] for q, g in data.pairs
    )
    assert len(data.files) == n_files and all(p.is_file() for p in data.files)


def test_registered_names() -> None:
    names = list_benchmarks()
    for name in (
        "usmle_step1",
        "usmle_step2",
        "usmle_step3",
        "usmle_ethics",
        "medqa",
        "medexpqa",
        "pubmedqa",
        "bioasq",
        "jsonl",
    ):
        assert name in names


def test_medqa_fields(data_root: Path) -> None:
    data = _load("medqa", data_root)
    assert [q.id for q, _ in data.pairs[:2]] == ["medqa-0", "medqa-1"]
    assert Counter(g.answer for _, g in data.pairs) == {"A": 353, "B": 309, "C": 346, "D": 265}
    assert Counter(q.metadata["meta_info"] for q, _ in data.pairs) == {"step1": 679, "step2&3": 594}
    assert all(list(q.options or {}) == ["A", "B", "C", "D"] for q, _ in data.pairs)


def test_medexpqa_explanations_and_none_options(data_root: Path) -> None:
    data = _load("medexpqa", data_root)
    assert sum(g.explanation is not None for _, g in data.pairs) == 118
    # The dummy "E": "None" slot is dropped: 67 items have 4 real options, 58 have 5.
    assert Counter(len(q.options or {}) for q, _ in data.pairs) == {4: 67, 5: 58}
    assert all("None" not in (q.options or {}).values() for q, _ in data.pairs)
    q0, g0 = data.pairs[0]
    assert q0.id == "medexpqa-0" and g0.answer == "D" and g0.answer_text == "Hemophilia A."
    assert g0.explanation is not None and g0.explanation.startswith("Although other hemorrhagic diseases")
    assert q0.metadata == {"type": "PEDIATRICS"}
    # idx without a CasiMedicos-Arg alignment (SOURCE.md) have no explanation.
    golds = {g.id: g for _, g in data.pairs}
    assert all(golds[f"medexpqa-{i}"].explanation is None for i in (3, 8, 62, 93, 97, 104, 106))


def test_pubmedqa_mirage_convention(data_root: Path) -> None:
    data = _load("pubmedqa", data_root)
    q, g = data.pairs[0]
    assert q.id == "pubmedqa-12377809"
    assert q.text == "Is anorectal endosonography valuable in dyschesia?"
    assert q.options == {"A": "yes", "B": "no", "C": "maybe"}
    assert q.metadata["contexts"] and all(isinstance(c, str) for c in q.metadata["contexts"])
    assert Counter(g.answer for _, g in data.pairs) == {"A": 276, "B": 169, "C": 55}
    # Nothing that states the label reaches the agent side.
    assert all(set(q.metadata) == {"contexts", "labels", "meshes", "year"} for q, _ in data.pairs)
    assert all(g.explanation for _, g in data.pairs)  # LONG_ANSWER, kept on the Gold side


def test_bioasq_yes_no(data_root: Path) -> None:
    data = _load("bioasq", data_root)
    assert Counter(g.answer for _, g in data.pairs) == {"A": 395, "B": 223}  # 394 "yes" + 1 "Yes"
    assert all(q.options == {"A": "yes", "B": "no"} for q, _ in data.pairs)
    assert not [
        r for r in data.rejected if r.reason.startswith("duplicate id")
    ]  # no id repeats across batches
    tasks = [q.metadata["task"] for q, _ in data.pairs]
    assert tasks == sorted(tasks, key=lambda t: -int(t[:-1]))  # 11b first, 7b last
    assert Counter(tasks) == {"11b": 86, "10b": 123, "9b": 117, "8b": 152, "7b": 140}
    assert [p.name for p in data.files[:2]] == ["11B1_golden.json.gz", "11B2_golden.json.gz"]
    assert data.pairs[0][0].id.startswith("bioasq-")


# ---------------------------------------------------------------- USMLE option parsing and filters


def test_parse_choices_plain_and_edge_cases() -> None:
    assert parse_choices("(A) BMI (B) Family history (C) Medication use") == {
        "A": "BMI",
        "B": "Family history",
        "C": "Medication use",
    }
    # Missing space after the marker, as in several 2021 items.
    assert parse_choices("(A)Granulosa tumor (B) Ovarian carcinoid") == {
        "A": "Granulosa tumor",
        "B": "Ovarian carcinoid",
    }
    # "(D)" inside an option is text when a real "(D)" marker follows.
    parsed = parse_choices("(A) Titer (B) Ultrasonography (C) Rh o(D) immune globulin (D) Amniocentesis")
    assert parsed["C"] == "Rh o(D) immune globulin" and parsed["D"] == "Amniocentesis"
    # A glued marker is used when no spaced one follows.
    assert parse_choices("(A) MRI with gadolinium(B) CT") == {"A": "MRI with gadolinium", "B": "CT"}
    assert parse_choices("no markers here") == {}


def test_usmle_options_parsing(data_root: Path) -> None:
    step1 = {q.id: (q, g) for q, g in _load("usmle_step1", data_root).pairs}
    q, g = step1["step1-19"]  # nine options, A..I
    assert list(q.options or {}) == list("ABCDEFGHI") and q.options and q.options["I"] == "Z → Y"
    assert Counter(len(q.options or {}) for q, _ in step1.values()) == {
        5: 259,
        6: 37,
        4: 21,
        8: 4,
        7: 3,
        9: 1,
    }
    assert step1["step1-0"][0].metadata == {
        "source": "Step 1 Free 119 Jan 2024",
        "question_number": 1,
        "question_type": "medical",
        "meta_info": "step1",
    }
    assert step1["step1-123"][0].metadata["question_type"] is None  # the one record without the field

    step2 = {q.id: (q, g) for q, g in _load("usmle_step2", data_root).pairs}
    q, g = step2["step2-228"]  # glued marker: "gadolinium(D) CT angiography"
    assert q.options == {
        "A": "Adenosine stress test",
        "B": "Cardiac catheterization",
        "C": "Cardiac MRI with gadolinium",
        "D": "CT angiography",
        "E": "Echocardiography with bubble study",
    }
    assert g.answer == "E"
    assert len(step2["step2-46"][0].options or {}) == 10  # the largest item, A..J
    assert step2["step2-316"][0].options and step2["step2-316"][0].options["D"] == "Amniocentesis"


def test_usmle_step1_duplicate_texts_keep_distinct_ids(data_root: Path) -> None:
    data = _load("usmle_step1", data_root)
    by_text: dict[str, list[str]] = {}
    for q, _ in data.pairs:
        by_text.setdefault(q.text, []).append(q.id)
    repeats = sorted(ids for ids in by_text.values() if len(ids) > 1)
    # The same item appears in two releases (Jan 2020 and Feb 2019); ids are per position, so all load.
    assert len(repeats) == 5 and all(len(ids) == 2 for ids in repeats)
    golds = {g.id: g for _, g in data.pairs}
    # One pair disagrees on the key (data issue upstream): same text and options, answer C vs A.
    assert (golds["step1-118"].answer, golds["step1-266"].answer) == ("C", "A")


def test_usmle_source_filter(data_root: Path) -> None:
    data = _load("usmle_step1", data_root, source="Jan 2024")
    assert len(data.pairs) == 107
    assert all("Jan 2024" in q.metadata["source"] for q, _ in data.pairs)
    assert data.pairs[0][0].id == "step1-0"  # ids keep the position in the whole file
    assert len(_load("usmle_step1", data_root, source="Free 119").pairs) == 227
    assert len(_load("usmle_step3", data_root, source="Nov 2020").pairs) == 122
    assert _load("usmle_step2", data_root, source="no such release").pairs == []


def test_limit_keeps_first_valid_pairs(data_root: Path) -> None:
    data = _load("medqa", data_root, limit=5)
    assert [q.id for q, _ in data.pairs] == [f"medqa-{i}" for i in range(5)]
    assert _load("bioasq", data_root, limit=3).pairs == _load("bioasq", data_root).pairs[:3]
    assert _load("medqa", data_root, limit=0).pairs == []
    with pytest.raises(ValueError):
        _load("medqa", data_root, limit=-1)


# ---------------------------------------------------------------- generic JSONL and the validator


def _good(i: int) -> dict[str, Any]:
    return {"id": f"q{i}", "question": f"Question {i}?", "options": {"A": "x", "B": "y"}, "answer": "B"}


BAD_ROWS: list[tuple[bytes, str]] = [
    (json.dumps({**_good(10), "options": {}}).encode(), "missing options"),
    (json.dumps({**_good(11), "options": {"A": "only one"}, "answer": "A"}).encode(), "missing options"),
    (json.dumps({k: v for k, v in _good(12).items() if k != "options"}).encode(), "missing field: options"),
    (json.dumps({**_good(13), "answer": "C"}).encode(), "answer not among options"),
    (json.dumps({**_good(14), "question": "   "}).encode(), "empty question"),
    (json.dumps(_good(1)).encode(), "duplicate id"),
    (b'{"id": "q15", "question": "caf\xe9?", "options": {"A": "x", "B": "y"}, "answer": "A"}', "not UTF-8"),
    (json.dumps({**_good(16), "options": ["x", "y"]}).encode(), "wrong type: options"),
    (json.dumps({**_good(17), "options": {"a": "x", "B": "y"}}).encode(), "wrong type: options"),
    (json.dumps({**_good(18), "options": {"A": "", "B": "y"}}).encode(), "wrong type: options"),
    (json.dumps({**_good(19), "answer": 1}).encode(), "wrong type: answer"),
    (json.dumps({**_good(20), "question": 42}).encode(), "wrong type: question"),
    (json.dumps({**_good(21), "id": ["q21"]}).encode(), "wrong type: id"),
    (json.dumps({**_good(22), "metadata": "oops"}).encode(), "wrong type: metadata"),
    (b'{"id": "q23", "question": ', "invalid JSON"),
    (b'["not", "an", "object"]', "not an object"),
]


def _write_jsonl(path: Path) -> None:
    lines = [json.dumps(_good(0)).encode(), json.dumps(_good(1)).encode()]
    lines += [raw for raw, _ in BAD_ROWS]
    lines += [b"", json.dumps({**_good(2), "explanation": "why", "metadata": {"k": 1}}).encode()]
    path.write_bytes(b"\n".join(lines) + b"\n")


def test_jsonl_rejects_each_kind_of_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    _write_jsonl(path)
    data = load_benchmark("jsonl", data_root=tmp_path, path=str(path))
    assert data.name == "mixed" and data.files == [path]
    assert [q.id for q, _ in data.pairs] == ["q0", "q1", "q2"]
    assert all(q.benchmark == "mixed" for q, _ in data.pairs)
    q2, g2 = data.pairs[2]
    assert g2 == Gold(id="q2", answer="B", answer_text="y", explanation="why") and q2.metadata == {"k": 1}
    assert len(data.rejected) == len(BAD_ROWS)
    for rejected, (_, reason) in zip(data.rejected, BAD_ROWS, strict=True):
        assert rejected.reason.startswith(reason), (rejected, reason)
        assert rejected.benchmark == "mixed" and len(rejected.raw) <= RAW_LIMIT
    # Rows are 1-based line numbers: the bad rows follow the two good lines.
    assert [r.row for r in data.rejected] == list(range(3, 3 + len(BAD_ROWS)))
    dup = next(r for r in data.rejected if r.reason.startswith("duplicate id"))
    assert dup.id == "q1" and "row 2" in dup.reason


def test_jsonl_name_relative_path_and_limit(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "mixed.jsonl")
    data = load_benchmark("jsonl", data_root=tmp_path, path="mixed.jsonl", name="custom", limit=3)
    assert data.name == "custom" and [q.id for q, _ in data.pairs] == ["q0", "q1", "q2"]
    assert all(q.benchmark == "custom" for q, _ in data.pairs)
    with pytest.raises(ValueError, match="path="):
        load_benchmark("jsonl", data_root=tmp_path)
    with pytest.raises(FileNotFoundError):
        load_benchmark("jsonl", data_root=tmp_path, path="absent.jsonl")


def test_validate_row_direct() -> None:
    rejected = validate_row("b", 7, "just a string")
    assert (
        isinstance(rejected, Rejected) and rejected.reason.startswith("not an object") and rejected.row == 7
    )
    long = {**_good(0), "answer": "Z", "question": "x" * 5000}
    rejected = validate_row("b", 1, long)
    assert isinstance(rejected, Rejected) and len(rejected.raw) <= RAW_LIMIT and rejected.id == "q0"
    ok = validate_row("b", 1, {**_good(0), "id": 5, "options": {"A": " x ", "B": "y"}, "answer": "A"})
    assert not isinstance(ok, Rejected)
    assert ok[0].id == "5" and ok[0].options == {"A": "x", "B": "y"} and ok[1].answer_text == "x"


def test_register_custom_benchmark(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(registry.BENCHMARKS, "_items", dict(registry.BENCHMARKS._items))

    @register_benchmark("tiny")
    def tiny(ctx: registry.LoadContext) -> Any:
        return iter([RawRow(1, _good(0)), RawRow(2, _good(0))])

    data = load_benchmark("tiny", data_root=tmp_path)
    assert len(data.pairs) == 1 and data.rejected[0].reason.startswith("duplicate id")
    with pytest.raises(ValueError):
        register_benchmark("tiny")(lambda ctx: iter([]))


# ---------------------------------------------------------------- errors and data-root resolution


def test_unknown_benchmark_lists_names(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="medqa"):
        load_benchmark("no_such_benchmark", data_root=tmp_path)


def test_hub_dispatch_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no hub loader"):
        load_benchmark("usmle_step1", data_root=tmp_path, source_kind="hub")
    with pytest.raises(ValueError, match="source_kind"):
        load_benchmark("medqa", data_root=tmp_path, source_kind="ftp")


def test_resolve_data_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    monkeypatch.setenv("MEDAGENT_DATA", str(env_dir))
    assert resolve_data_root(None) == env_dir
    assert resolve_data_root(tmp_path) == tmp_path  # explicit wins over the env var
    monkeypatch.setenv("MEDAGENT_DATA", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="MEDAGENT_DATA"):
        resolve_data_root(None)
    with pytest.raises(FileNotFoundError, match="data_root"):
        resolve_data_root(tmp_path / "also-missing")
    monkeypatch.delenv("MEDAGENT_DATA")
    try:
        found = resolve_data_root(None)  # falls back to ../shared/data beside the repository
    except FileNotFoundError as exc:
        assert "MEDAGENT_DATA" in str(exc) and "data_root=" in str(exc)
    else:
        assert found.name == "data" and found.parent.name == "shared"


# ---------------------------------------------------------------- the QA paper's item sets


@pytest.mark.parametrize(("name", "n_items"), sorted(PAPER_COUNTS.items()))
def test_paper_item_sets(data_root: Path, name: str, n_items: int) -> None:
    if not (data_root / "usmle_paper").is_dir() and name.startswith("usmle"):
        pytest.skip("usmle_paper/ is not in this data root")
    data = _load(name, data_root)
    assert (data.name, len(data.pairs), data.rejected) == (name, n_items, [])
    assert len({q.id for q, _ in data.pairs}) == n_items
    assert all(g.answer in (q.options or {}) for q, g in data.pairs)  # every gold is an option


def test_paper_counts_are_the_papers() -> None:
    # 82.98 % = 78/94, 86.24 % = 94/109, 88.52 % = 108/122 (docs/PAPER_CONVENTIONS.md).
    for name, correct, pct in (("usmle_step1_paper", 78, 82.98), ("usmle_step2_paper", 94, 86.24),
                               ("usmle_step3_paper", 108, 88.52)):  # fmt: skip
        assert round(100 * correct / PAPER_COUNTS[name], 2) == pct


def test_paper_ids_carry_the_lab_index(data_root: Path) -> None:
    if not (data_root / "usmle_paper").is_dir():
        pytest.skip("usmle_paper/ is not in this data root")
    data = _load("usmle_step1_paper", data_root)
    q, _ = data.pairs[47]
    assert q.id == "usmle_step1-paper-47" and item_index(q.id) == 47 == q.metadata["index"]
    assert item_index("step1-47") is None


def test_medexpqa_paper_options_as_shown(data_root: Path) -> None:
    plain = {q.id: q for q, _ in _load("medexpqa", data_root).pairs}
    paper = _load("medexpqa_paper", data_root).pairs
    assert {q.id for q, _ in paper} == set(plain)
    assert sum(len(q.options or {}) == 4 for q, _ in paper) == 67  # "E: None" is not shown
    q, g = paper[0]
    assert q.options == {"A": "Marfan syndrome", "B": "Von-Willebrand's disease", "C": "Ehlers-Danlos disease",
                         "D": "Hemophilia A", "E": "Bernard-Soulier disease"}  # fmt: skip
    assert g.answer == "D" and g.answer_text == "Hemophilia A"


def test_medqa_paper_is_medqa(data_root: Path) -> None:
    a, b = _load("medqa", data_root).pairs, _load("medqa_paper", data_root).pairs
    assert [(q.text, q.options, g.answer) for q, g in a] == [(q.text, q.options, g.answer) for q, g in b]
