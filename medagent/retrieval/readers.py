"""Readers of the local sources and ClinicalTrials.gov (registered on import; MedRAG-style files, the hub
corpora and NEJM are in ``medrag``, PMC and Bookshelf full text in ``jats``). Each reshapes one format into
candidate documents ``{id, title, content, parent_id}``; checking is left to
``medagent.retrieval.corpus.normalize_record``.

Ids are stable and unique across sources: the local sources prefix theirs (``medquad:``, ``pubmedqa:``,
``bioasq:``, ``nct:``, ``pmc:``, ``book:``, ``nejm:``); MedRAG-style records keep their own ids (``pubmed23n0001_0``, ...), which are
already unique per corpus. Paths are relative to the data root (see each data folder's ``SOURCE.md``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from medagent.retrieval.medrag import iter_jsonl
from medagent.retrieval.reading import RawRecord, ReadContext, register_reader

_PMID = re.compile(r"(\d+)\s*/?\s*$")


def pmid_of(ref: str) -> str | None:
    """The PubMed id a BioASQ article reference ends with (``http://www.ncbi.nlm.nih.gov/pubmed/12345``), else
    None: one reading for the snippet reader's ids and for the articles a held-out run leaves out."""
    m = _PMID.search(ref)
    return m.group(1) if m else None


# MedQuAD ----------------------------------------------------------------------------------------------
def medquad_doc_key(member: str) -> str:
    """``1_CancerGov_QA/0000013_2_1.xml`` -> ``1-0000013_2_1``. The XML ``Document id`` and ``qid`` are not
    unique (split CancerGov files repeat them; subsets reuse file names), the subset number + file name is."""
    folder, _, name = member.rpartition("/")
    return f"{folder.split('_', 1)[0]}-{Path(name).stem}"


def _medquad_file(name: str, data: bytes) -> Iterator[RawRecord | dict[str, Any]]:
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        yield RawRecord(None, {"file": name}, f"XML parse error ({exc})")
        return
    key = medquad_doc_key(name)
    focus = (root.findtext("Focus") or "").strip()
    for pair in root.iter("QAPair"):
        pid = pair.get("pid")
        yield {
            "id": f"medquad:{key}-{pid}" if pid else None,
            "title": focus,
            "content": pair.findtext("Answer") or "",
            "parent_id": f"medquad:{key}",
        }


@register_reader("medquad_xml")
def read_medquad(
    ctx: ReadContext, path: str = "medquad/MedQuAD_xml.tar.gz", subsets: Iterable[str] | None = None
) -> Iterator[RawRecord]:
    """MedQuAD QA pairs from the XML archive: one document per answer, the focus entity as title.

    Three subsets have their answers removed upstream (MedlinePlus copyright); those pairs are rejected
    as ``empty content`` and counted, like any record without text.

    Args:
        path: The ``.tar.gz`` of the 12 subset folders.
        subsets: Keep only folders whose name contains one of these strings (e.g. ``CancerGov``).
    """
    archive = ctx.file(path)
    wanted = tuple(subsets or ())

    def records() -> Iterator[RawRecord]:
        row = 0
        with tarfile.open(archive) as tar:
            for member in tar:  # archive order is fixed, so ids and rows are stable
                if not (member.isfile() and member.name.endswith(".xml")):
                    continue
                if wanted and not any(w in member.name for w in wanted):
                    continue
                fh = tar.extractfile(member)
                for item in _medquad_file(member.name, fh.read() if fh else b""):
                    row += 1
                    yield item if isinstance(item, RawRecord) else RawRecord(row, item)

    return records()


# PubMedQA ---------------------------------------------------------------------------------------------
@register_reader("pubmedqa")
def read_pubmedqa(
    ctx: ReadContext, path: str = "pubmedqa_pqal/ori_pqal.json", include_conclusion: bool = False
) -> Iterator[RawRecord]:
    """PubMedQA PQA-L abstracts: ``CONTEXTS`` joined, the ``QUESTION`` as pseudo-title (no titles ship).

    Args:
        path: ``ori_pqal.json`` (``{pmid: record}``).
        include_conclusion: Append ``LONG_ANSWER`` (the abstract's conclusion). Off by default: it states
            the benchmark's answer, which an index used to evaluate PubMedQA must not hold.
    """
    file = ctx.file(path)

    def records() -> Iterator[RawRecord]:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read {file}: {exc}") from exc
        for row, (pmid, rec) in enumerate(data.items(), 1):
            if not isinstance(rec, dict):
                yield RawRecord(row, rec, "not an object")
                continue
            contexts = rec.get("CONTEXTS")
            if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
                yield RawRecord(row, {"id": pmid, **rec}, "wrong type: CONTEXTS is not a list of strings")
                continue
            parts = contexts + ([rec["LONG_ANSWER"]] if include_conclusion and rec.get("LONG_ANSWER") else [])
            title = rec.get("QUESTION")
            yield RawRecord(
                row,
                {
                    "id": f"pubmedqa:{pmid}",
                    "title": title if isinstance(title, str) else None,
                    "content": " ".join(parts),
                    "parent_id": f"pubmed:{pmid}",
                },
            )

    return records()


# BioASQ snippets --------------------------------------------------------------------------------------
def _task_of(path: Path) -> int:
    m = re.match(r"Task(\d+)", path.parent.name)
    return int(m.group(1)) if m else 0


@register_reader("bioasq_snippets")
def read_bioasq_snippets(
    ctx: ReadContext, path: str = "mirage_rawdata/bioasq", tasks: Iterable[int] | None = None
) -> Iterator[RawRecord]:
    """Gold snippets of the BioASQ golden files (real PubMed sentences), de-duplicated.

    The same snippet recurs across questions and yearly tasks; it is kept once, keyed by PubMed id and
    text. The question is *not* used as title: it is benchmark text (and the snippet is its gold evidence).

    Args:
        path: Folder of ``Task*BGoldenEnriched/*_golden.json.gz`` files.
        tasks: Keep only these yearly tasks (e.g. ``[11]``); all by default.
    """
    keep = {int(t) for t in tasks} if tasks is not None else None
    files = [f for f in ctx.glob(path, ("*_golden.json.gz",)) if keep is None or _task_of(f) in keep]
    ctx.files[:] = [f for f in ctx.files if f in files]

    def records() -> Iterator[RawRecord]:
        seen: set[tuple[str, str]] = set()
        row = 0
        for file in sorted(files, key=lambda f: (_task_of(f), f.name)):
            with gzip.open(file, "rt", encoding="utf-8") as fh:
                questions = json.load(fh).get("questions", [])
            for q in questions:
                for snip in q.get("snippets") or []:
                    row += 1
                    text, doc = snip.get("text"), snip.get("document")
                    if not isinstance(text, str) or not isinstance(doc, str):
                        yield RawRecord(row, snip, "wrong type: snippet text/document is not a string")
                        continue
                    pmid = pmid_of(doc) or doc
                    key = (pmid, " ".join(text.split()))
                    if key in seen:
                        continue  # a repeat, not a malformed record
                    seen.add(key)
                    digest = hashlib.sha1(key[1].encode("utf-8")).hexdigest()[:12]
                    data = {"id": f"bioasq:{pmid}:{digest}", "title": "", "content": text}
                    yield RawRecord(row, {**data, "parent_id": f"pubmed:{pmid}"})

    return records()


# ClinicalTrials.gov -----------------------------------------------------------------------------------
def _join(*parts: Any) -> str:
    return "\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())


def trial_from_json(study: dict[str, Any]) -> dict[str, Any]:
    """A ClinicalTrials.gov API v2 study (``protocolSection``) as a candidate document."""
    proto = study.get("protocolSection") or {}
    ident = proto.get("identificationModule") or {}
    desc = proto.get("descriptionModule") or {}
    conds = (proto.get("conditionsModule") or {}).get("conditions") or []
    elig = (proto.get("eligibilityModule") or {}).get("eligibilityCriteria")
    nct = ident.get("nctId")
    content = _join(
        desc.get("briefSummary"),
        desc.get("detailedDescription"),
        "Conditions: " + ", ".join(c for c in conds if isinstance(c, str)) if conds else None,
        f"Eligibility: {elig}" if isinstance(elig, str) else None,
    )
    return {"id": f"nct:{nct}" if nct else None, "title": ident.get("briefTitle") or ident.get("officialTitle"),
            "content": content, "parent_id": None}  # fmt: skip


def trial_from_xml(data: bytes) -> dict[str, Any]:
    """A legacy ClinicalTrials.gov XML record (``<clinical_study>``) as a candidate document."""
    root = ET.fromstring(data)
    nct = root.findtext("id_info/nct_id")
    conds = [c.text or "" for c in root.findall("condition")]
    content = _join(
        root.findtext("brief_summary/textblock"),
        root.findtext("detailed_description/textblock"),
        "Conditions: " + ", ".join(conds) if conds else None,
        "Eligibility: " + (root.findtext("eligibility/criteria/textblock") or "").strip()
        if root.find("eligibility/criteria/textblock") is not None
        else None,
    )
    title = root.findtext("brief_title") or root.findtext("official_title")
    return {"id": f"nct:{nct}" if nct else None, "title": title, "content": content, "parent_id": None}


@register_reader("clinicaltrials")
def read_clinicaltrials(ctx: ReadContext, path: str) -> Iterator[RawRecord]:
    """ClinicalTrials.gov records from a local dump: API v2 JSON (one study per ``.json`` file, a
    ``{"studies": [...]}`` page, or ``.jsonl``) or the legacy per-study XML files.

    Args:
        path: A file or a folder searched recursively for ``*.json``, ``*.jsonl`` and ``*.xml``.
    """
    files = ctx.glob(path, ("*.json", "*.jsonl", "*.xml"))

    def records() -> Iterator[RawRecord]:
        row = 0
        for file in files:
            if file.suffix == ".jsonl":
                for rec in iter_jsonl(file, row):
                    row = rec.row or row
                    yield rec if rec.error else RawRecord(rec.row, trial_from_json(rec.data))
                continue
            row += 1
            try:
                if file.suffix == ".xml":
                    yield RawRecord(row, trial_from_xml(file.read_bytes()))
                    continue
                data = json.loads(file.read_text(encoding="utf-8"))
            except (ET.ParseError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                yield RawRecord(
                    row, {"file": file.name}, f"unreadable record file ({exc.__class__.__name__})"
                )
                continue
            studies = data.get("studies", [data]) if isinstance(data, dict) else data
            for i, study in enumerate(studies if isinstance(studies, list) else [studies]):
                row += i > 0
                ok = isinstance(study, dict)
                yield RawRecord(row, trial_from_json(study)) if ok else RawRecord(row, study, "not an object")

    return records()
