"""Annotate interviews: ``python -m pipelines.annotate_interviews interviews=osce_res annotator=lexicon run_dir=...``.

Turns raw interviews (Fareez OSCE transcripts, MediTOD text) into MediTOD-style annotations - positive and
negative findings, the physician's differential, the category of every physician question - and scores
the same annotator on the 3 public gold MediTOD dialogues.

- ``annotator=lexicon`` runs in this process (no Ray): 213 interviews take seconds.
- ``annotator=llm`` is a Ray Data job: ``AnnotateWorker`` actors call the LLM deployment (``llm=...``; the
  CPU default serves Qwen2.5-Coder-1.5B through Ray Serve).

Run dir: ``annotations.jsonl`` (one ``Annotation.to_dict()`` per line; a rerun with the same ``run_dir``
skips interview ids already written), ``gold_annotations.jsonl``, ``annotation_eval.md`` / ``.csv``,
``metrics.json`` and ``manifest.json``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from medagent.config import AnnotateRunConfig
from medagent.interview import meditod
from medagent.interview.annotate import LexiconAnnotator, score_annotations, write_report
from medagent.interview.annotate import lexicon as lexicon_module
from medagent.interview.annotate import llm as llm_module
from medagent.interview.annotate import questions as questions_module
from medagent.interview.annotate.evaluate import format_markdown
from medagent.interview.annotate.matcher import Lexicon
from medagent.interview.annotate.vocab import build_disease_lexicon, build_symptom_lexicon
from medagent.interview.sources import load_interviews
from medagent.interview.transcripts import Interview
from medagent.interview.types import Annotation
from medagent.run import RunDir, build_manifest
from pipelines.common import deploy, drain, finished_batches, log, ray_session, setup_logging

RUN, GOLD = "run", "gold"
KEY = "interview_id"


def endpoint_failed(record: dict[str, Any]) -> bool:
    """An annotation cut short by an LLM endpoint failure: the next run annotates it again."""
    return any("LLMError" in e for e in record.get("errors", []))


def _append(rd: RunDir, role: str, annotations: list[Annotation]) -> int:
    path = rd.annotations if role == RUN else rd.gold_annotations
    return rd.append_records(path, (a.to_dict() for a in annotations), key=KEY, failed=endpoint_failed)


def _annotate_in_process(
    todo: list[tuple[str, Interview]], annotator: LexiconAnnotator, rd: RunDir, progress: bool
) -> None:
    with tqdm(
        total=len(todo), desc="lexicon", unit="interview", disable=not progress, file=sys.stderr
    ) as bar:
        for start in range(0, len(todo), 25):
            batch = todo[start : start + 25]
            for role in (RUN, GOLD):
                _append(rd, role, [annotator.annotate(iv) for r, iv in batch if r == role])
            bar.update(len(batch))


def stream_llm_annotations(
    cfg: AnnotateRunConfig, todo: list[tuple[str, Interview]], symptoms: Lexicon, diseases: Lexicon
) -> Iterator[list[tuple[str, Annotation]]]:
    """Shards ``todo`` over ``AnnotateWorker`` actors with Ray Data; yields ``(role, annotation)`` per batch."""
    import ray

    from actors.annotate_worker import AnnotateWorker
    from actors.backends import llm_endpoint
    from actors.builder import annotate_worker_map_kwargs

    ray.data.DataContext.get_current().enable_progress_bars = False  # our tqdm bar counts interviews
    rows = [{"id": iv.id, "role": role, "interview": iv.to_json()} for role, iv in todo]
    ds = ray.data.from_items(rows).map_batches(
        AnnotateWorker,
        fn_constructor_kwargs={
            "annotator": asdict(cfg.annotator),
            "llm": asdict(cfg.llm),
            "llm_endpoint": llm_endpoint(cfg.llm, cfg.cluster),
            "symptoms": symptoms,
            "diseases": diseases,
        },
        **annotate_worker_map_kwargs(cfg.cluster, cfg.annotator.max_concurrency),
    )
    for batch in finished_batches(ds, "pandas", llm_bound=True):
        yield [
            (role, Annotation.from_dict(json.loads(s)))
            for role, s in zip(batch["role"], batch["annotation"], strict=True)
        ]


def _annotate_with_ray(
    cfg: AnnotateRunConfig,
    todo: list[tuple[str, Interview]],
    symptoms: Lexicon,
    diseases: Lexicon,
    rd: RunDir,
) -> None:
    from actors.deploy import Needs

    with ray_session(cfg.cluster):
        deploy(Needs(cfg.llm, cfg.cluster))

        def write(results: Sequence[tuple[str, Annotation]]) -> None:
            for role in (RUN, GOLD):
                _append(rd, role, [a for r, a in results if r == role])

        drain(
            stream_llm_annotations(cfg, todo, symptoms, diseases),
            write,
            failed=lambda result: endpoint_failed(result[1].to_dict()),
            total=len(todo),
            desc=f"llm/{cfg.llm.name}",
            unit="interview",
            progress=cfg.progress,
            min_n=cfg.error_budget_min_n,
            max_error_rate=cfg.max_error_rate,
            budget_message=lambda failed, done: (
                f"{failed} of {done} interviews hit LLM endpoint failures (> max_error_rate="
                f"{cfg.max_error_rate}); see 'errors' in {rd.annotations}. Rerun with run_dir={rd.root} "
                "to resume once the endpoint is fixed (finished interviews are skipped)."
            ),
        )


def _notes(kind: str) -> list[str]:
    module = lexicon_module if kind == "lexicon" else llm_module
    return [
        "### Gold annotations\n" + (meditod.__doc__ or ""),
        f"### The `{kind}` annotator\n" + (module.__doc__ or ""),
        "### Questions\n" + (questions_module.__doc__ or ""),
        "### Caveat\nThe lexicon's supplementary synonyms and the question rules were checked against these "
        "same 3 dialogues, so lexicon scores here are in-sample (optimistic) figures; the LLM annotator never "
        "sees gold labels.",
    ]


def run(cfg: AnnotateRunConfig) -> dict[str, Any]:
    """Annotates the configured interviews (resumable), scores the annotator on the gold sample, returns metrics."""
    kind = cfg.annotator.kind
    data = load_interviews(
        cfg.interviews.name,
        cfg.interviews.source,
        cfg.data_root,
        prefix=cfg.interviews.prefix,
        ids=list(cfg.interviews.ids),
        limit=cfg.limit,
    )
    gold_pairs = meditod.load_meditod(cfg.data_root) if cfg.evaluate_gold else []
    ontology = meditod.load_ontology(cfg.data_root)
    symptoms, diseases = build_symptom_lexicon(ontology), build_disease_lexicon(ontology)

    rd = RunDir.create(cfg.run_dir, cfg.outputs_root, f"annotate-{cfg.interviews.name}-{kind}")
    files = [*data.files, *meditod.ontology_files(cfg.data_root)]
    manifest = build_manifest(
        asdict(cfg), files, rd.read_json(rd.manifest), annotator=kind, n_interviews=len(data.interviews)
    )
    rd.write_json(rd.manifest, manifest)

    done = rd.completed_keys(rd.annotations, KEY, endpoint_failed)
    gold_done = rd.completed_keys(rd.gold_annotations, KEY, endpoint_failed)
    todo = [(RUN, iv) for iv in data.interviews if iv.id not in done]
    todo += [(GOLD, iv) for iv, _ in gold_pairs if iv.id not in gold_done]
    log.info(
        "%s: %d interviews (%d already annotated in %s), %d gold dialogues; %d to annotate with %s",
        cfg.interviews.name,
        len(data.interviews),
        len(data.interviews) - sum(r == RUN for r, _ in todo),
        rd.root,
        len(gold_pairs),
        len(todo),
        kind,
    )
    if todo and kind == "lexicon":
        _annotate_in_process(todo, LexiconAnnotator(symptoms, diseases), rd, cfg.progress)
    elif todo:
        _annotate_with_ray(cfg, todo, symptoms, diseases, rd)

    wanted = {iv.id for iv in data.interviews}
    annotations = [Annotation.from_dict(r) for r in rd.latest_records(rd.annotations, KEY, endpoint_failed)]
    annotations = [a for a in annotations if a.interview_id in wanted]
    result: dict[str, Any] = {
        "run_dir": str(rd.root),
        "annotator": kind,
        "interviews": cfg.interviews.name,
        "n_interviews": len(data.interviews),
        "n_annotated": len(annotations),
        "n_with_errors": sum(bool(a.errors) for a in annotations),
        "parse_issues": sum(len(iv.issues) for iv in data.interviews),
    }
    if gold_pairs:
        gold_rows = rd.latest_records(rd.gold_annotations, KEY, endpoint_failed)
        preds = {a.interview_id: a for a in map(Annotation.from_dict, gold_rows)}
        report = score_annotations(preds, {g.interview_id: g for _, g in gold_pairs}, annotator=kind)
        write_report(report, rd.annotation_eval_md, rd.annotation_eval_csv, _notes(kind))
        result["gold_eval"] = report.to_dict()
        print("\n" + format_markdown(report).split("## Conventions")[0].rstrip())
    rd.write_json(rd.metrics, result)
    print(f"\nrun directory: {rd.root}")
    return result


ConfigStore.instance().store(name="annotate_schema", node=AnnotateRunConfig)


@hydra.main(config_path="../conf", config_name="annotate_interviews", version_base="1.3")
def main(cfg: DictConfig) -> None:
    setup_logging()
    run_cfg: AnnotateRunConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    if run_cfg.run_dir and not Path(run_cfg.run_dir).is_absolute():
        run_cfg.run_dir = str(Path(run_cfg.run_dir).resolve())
    run(run_cfg)


if __name__ == "__main__":
    main()
