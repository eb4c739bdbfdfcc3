"""PMC Open Access (JATS) and Bookshelf / LitArch (BITS .nxml) readers on small files in the real formats,
written here: sections, nested sections, titles, abstracts, namespaced MathML, tarballs, malformed files."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from medagent.retrieval.chunking import chunk_documents
from medagent.retrieval.config import ChunkingConfig, SourceConfig
from medagent.retrieval.corpus import Document, RejectedRecord, normalize_record, open_source

# A PMC OA article as the OA packages ship it: DOCTYPE-free JATS 1.3 with XLink and MathML namespaces, a
# structured abstract, a graphical abstract (left out), nested sections, a table and a formula (not prose),
# a figure caption (prose), a reference list (not prose).
JATS = """<?xml version="1.0" encoding="UTF-8"?>
<article xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:mml="http://www.w3.org/1998/Math/MathML"
         article-type="case-report" dtd-version="1.3">
  <front>
    <journal-meta><journal-title-group><journal-title>Case Rep Med</journal-title></journal-title-group></journal-meta>
    <article-meta>
      <article-id pub-id-type="pmid">31234567</article-id>
      <article-id pub-id-type="pmc">PMC6543210</article-id>
      <article-id pub-id-type="doi">10.1000/crm.2019.1</article-id>
      <title-group><article-title>Scurvy in a <italic>modern</italic> adult</article-title></title-group>
      <abstract>
        <sec><title>Background</title><p>Vitamin C deficiency is rare today.</p></sec>
        <sec><title>Case</title><p>A man had bleeding gums and perifollicular haemorrhages.</p></sec>
      </abstract>
      <abstract abstract-type="graphical"><p>A picture of gums.</p></abstract>
    </article-meta>
  </front>
  <body>
    <sec id="s1"><title>Introduction</title>
      <p>Scurvy results from a lack of ascorbic acid <xref ref-type="bibr" rid="r1">[1]</xref>.</p>
    </sec>
    <sec id="s2"><title>Methods</title>
      <p>We reviewed the record.</p>
      <sec id="s2.1"><title>Laboratory tests</title>
        <p>Plasma ascorbate was <inline-formula><mml:math><mml:mi>x</mml:mi></mml:math></inline-formula> below
        the limit of detection.</p>
        <table-wrap id="t1"><caption><p>Laboratory values at admission.</p></caption>
          <table><tr><td>ascorbate</td><td>0.1</td></tr></table></table-wrap>
        <disp-formula><mml:math><mml:mi>y</mml:mi><mml:mo>=</mml:mo></mml:math></disp-formula>
      </sec>
    </sec>
    <sec id="s3"><title>Discussion</title>
      <fig id="f1"><caption><p>Perifollicular haemorrhages on the legs.</p></caption></fig>
      <p>Oral vitamin C resolved the symptoms within weeks.</p>
    </sec>
  </body>
  <back><ref-list><ref id="r1"><mixed-citation>Smith J. Scurvy. 1990.</mixed-citation></ref></ref-list></back>
</article>
"""

# An article without sections in its body and without a PMC article-id (the file name is the fallback).
JATS_FLAT = """<article><front><article-meta><article-id pub-id-type="pmid">1</article-id>
<title-group><article-title>Short note</article-title></title-group>
<abstract><p>An unstructured abstract about rickets.</p></abstract></article-meta></front>
<body><p>The body has paragraphs only.</p><p>Two of them.</p></body></article>"""

# A StatPearls article (one book part in a book-part-wrapper), and a LitArch book with two chapters, the
# second holding a nested book part of its own.
STATPEARLS = """<?xml version="1.0"?>
<book-part-wrapper xmlns:xlink="http://www.w3.org/1999/xlink" dtd-version="2.0">
  <collection-meta><title-group><title>StatPearls</title></title-group></collection-meta>
  <book-meta><book-id book-id-type="pmcid">statpearls</book-id>
    <book-title-group><book-title>StatPearls</book-title></book-title-group></book-meta>
  <book-part book-part-type="chapter" id="article-17127">
    <book-part-meta><title-group><title>Acute Otitis Media</title></title-group></book-part-meta>
    <body>
      <sec><title>Continuing Education Activity</title><p>Otitis media is an infection of the middle ear.</p></sec>
      <sec><title>Treatment / Management</title><p>Amoxicillin is the first-line antibiotic.</p>
        <sec><title>Penicillin allergy</title><p>Cefdinir or azithromycin may be used.</p></sec>
      </sec>
    </body>
  </book-part>
</book-part-wrapper>
"""

BOOK = """<book dtd-version="2.0">
  <book-meta><book-id book-id-type="publisher">NBK0001</book-id>
    <book-title-group><book-title>Clinical Methods</book-title></book-title-group></book-meta>
  <body>
    <book-part book-part-type="chapter" id="ch1">
      <book-part-meta><title-group><title>The History</title></title-group></book-part-meta>
      <body><p>Taking a history comes first.</p></body>
    </book-part>
    <book-part book-part-type="chapter" id="ch2">
      <book-part-meta><title-group><title>Cardiovascular System</title></title-group></book-part-meta>
      <body><sec><title>Chest pain</title><p>Ask about exertion.</p></sec>
        <book-part book-part-type="section" id="ch2s1">
          <book-part-meta><title-group><title>Murmurs</title></title-group></book-part-meta>
          <body><p>Grade murmurs from one to six.</p></body>
        </book-part>
      </body>
    </book-part>
  </body>
</book>"""


def _read(reader: str, path: Path) -> list[Document | RejectedRecord]:
    opened = open_source(SourceConfig("s", reader, {"path": str(path)}), None)
    return [normalize_record("s", r) for r in opened.records]


def _docs(out: list[Document | RejectedRecord]) -> dict[str, Document]:
    return {d.id: d for d in out if isinstance(d, Document)}


def test_jats_sections_keep_the_article_title_and_their_heading_path(tmp_path: Path) -> None:
    (tmp_path / "PMC6543210.xml").write_text(JATS, encoding="utf-8")
    docs = _docs(_read("pmc_oa", tmp_path))
    assert [(d.id, d.title) for d in docs.values()] == [
        ("pmc:PMC6543210:0", "Scurvy in a modern adult — Abstract › Background"),
        ("pmc:PMC6543210:1", "Scurvy in a modern adult — Abstract › Case"),
        ("pmc:PMC6543210:2", "Scurvy in a modern adult — Introduction"),
        ("pmc:PMC6543210:3", "Scurvy in a modern adult — Methods"),
        ("pmc:PMC6543210:4", "Scurvy in a modern adult — Methods › Laboratory tests"),
        ("pmc:PMC6543210:5", "Scurvy in a modern adult — Discussion"),
    ]
    assert all(d.parent_id == "pmc:PMC6543210" for d in docs.values())
    assert docs["pmc:PMC6543210:2"].content == "Scurvy results from a lack of ascorbic acid [1]."
    # A parent section holds its own paragraphs only; the subsection's text is not repeated in it.
    assert docs["pmc:PMC6543210:3"].content == "We reviewed the record."
    lab = docs["pmc:PMC6543210:4"].content
    assert "below the limit of detection" in lab and "Laboratory values at admission." in lab
    assert "ascorbate 0.1" not in lab and "=" not in lab  # the table and formulas are not prose
    assert "Perifollicular haemorrhages on the legs." in docs["pmc:PMC6543210:5"].content
    text = " ".join(d.content for d in docs.values())
    assert "A picture of gums" not in text and "Smith J." not in text  # graphical abstract, references


def test_jats_without_sections_or_pmc_id_falls_back_to_paragraphs_and_the_file_name(tmp_path: Path) -> None:
    (tmp_path / "PMC42.nxml").write_text(JATS_FLAT, encoding="utf-8")
    docs = _docs(_read("pmc_oa", tmp_path))
    assert [(d.id, d.title, d.content) for d in docs.values()] == [
        ("pmc:PMC42:0", "Short note — Abstract", "An unstructured abstract about rickets."),
        ("pmc:PMC42:1", "Short note", "The body has paragraphs only. Two of them."),
    ]


def test_jats_chunks_carry_the_section_title(tmp_path: Path) -> None:
    (tmp_path / "a.xml").write_text(JATS, encoding="utf-8")
    docs = [d for d in _read("pmc_oa", tmp_path) if isinstance(d, Document)]
    chunks = list(chunk_documents(docs, ChunkingConfig(size=4, overlap=0, min_words=0)))
    lab = [c for c in chunks if c.doc_id == "pmc:PMC6543210:4"]
    assert len(lab) > 2 and {c.title for c in lab} == {
        "Scurvy in a modern adult — Methods › Laboratory tests"
    }
    assert [c.id for c in lab[:2]] == ["pmc:PMC6543210:4#0", "pmc:PMC6543210:4#1"]


def _tarball(path: Path, members: dict[str, str]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_pmc_bulk_tarballs_are_read_member_by_member_and_bad_files_set_aside(tmp_path: Path) -> None:
    _tarball(
        tmp_path / "oa_comm_xml.PMC006xxxxxx.baseline.tar.gz",
        {
            "PMC006xxxxxx/PMC6543210.xml": JATS,
            "PMC006xxxxxx/PMC6000001.xml": "<article><front><article-meta>",  # truncated
            "PMC006xxxxxx/PMC6000002.xml": "<book><body/></book>",  # not an article
            "PMC006xxxxxx/PMC6000003.xml": "<article><front><article-meta><article-id pub-id-type='pmc'>"
            "6000003</article-id></article-meta></front><body/></article>",  # no text
            "PMC006xxxxxx/README.txt": "not XML, not read",
        },
    )
    (tmp_path / "broken.tar.gz").write_bytes(b"\x1f\x8b\x08not really gzip")
    out = _read("pmc_oa", tmp_path)
    assert len(_docs(out)) == 6
    rejected = [r for r in out if isinstance(r, RejectedRecord)]
    reasons = [r.reason.split(" (")[0] for r in rejected]
    assert reasons == [
        "unreadable archive",
        "XML parse error",
        "no <article> element",
        "no text",
    ]
    assert all(r.row is not None and r.raw for r in rejected)  # each is counted and kept for the audit
    assert "PMC6000001.xml" in rejected[1].raw


def test_statpearls_book_part_sections_are_titled_book_chapter_section(tmp_path: Path) -> None:
    (tmp_path / "article-17127.nxml").write_text(STATPEARLS, encoding="utf-8")
    docs = _docs(_read("bookshelf", tmp_path))
    assert [(d.id, d.title) for d in docs.values()] == [
        (
            "book:statpearls:article-17127:0",
            "StatPearls — Acute Otitis Media — Continuing Education Activity",
        ),
        ("book:statpearls:article-17127:1", "StatPearls — Acute Otitis Media — Treatment / Management"),
        (
            "book:statpearls:article-17127:2",
            "StatPearls — Acute Otitis Media — Treatment / Management › Penicillin allergy",
        ),
    ]
    assert docs["book:statpearls:article-17127:1"].content == "Amoxicillin is the first-line antibiotic."
    assert {d.parent_id for d in docs.values()} == {"book:statpearls:article-17127"}


def test_litarch_book_chapters_and_nested_parts_are_read_once_each(tmp_path: Path) -> None:
    _tarball(tmp_path / "NBK0001.tar.gz", {"NBK0001/NBK0001.nxml": BOOK})
    (tmp_path / "bad.nxml").write_text("<book><body>", encoding="utf-8")
    (tmp_path / "article.nxml").write_text(JATS_FLAT, encoding="utf-8")
    out = _read("bookshelf", tmp_path)
    docs = _docs(out)
    assert [(d.id, d.title, d.content) for d in docs.values()] == [
        ("book:NBK0001:ch1:0", "Clinical Methods — The History", "Taking a history comes first."),
        (
            "book:NBK0001:ch2:0",
            "Clinical Methods — Cardiovascular System — Chest pain",
            "Ask about exertion.",
        ),
        ("book:NBK0001:ch2s1:0", "Clinical Methods — Murmurs", "Grade murmurs from one to six."),
    ]
    reasons = sorted(r.reason.split(" (")[0] for r in out if isinstance(r, RejectedRecord))
    assert reasons == ["XML parse error", "not a BITS book"]


def test_a_missing_path_fails_before_reading(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no file or folder"):
        open_source(SourceConfig("s", "pmc_oa", {"path": "absent"}), tmp_path)
    with pytest.raises(FileNotFoundError, match="no \\*.xml/\\*.nxml/\\*.tar.gz files"):
        open_source(SourceConfig("s", "bookshelf", {"path": str(tmp_path)}), None)
