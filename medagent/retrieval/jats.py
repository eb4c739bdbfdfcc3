"""Full-text XML readers: PubMed Central Open Access articles (JATS) and NCBI Bookshelf / LitArch books
(BITS ``.nxml``, StatPearls among them).

Both formats share JATS's body model (``<sec>`` with a ``<title>`` and ``<p>`` paragraphs, nested to any
depth), so one section walker serves both. Each section becomes one candidate document whose title keeps
where it came from (``article title — Methods › Statistical analysis``): the chunker copies a document's
title into every chunk, and the embedder reads title + text, so a 128-word window from the middle of a
long section still says which article and which section it belongs to. A section's own paragraphs are its
content; its subsections are documents of their own (their text is not repeated in the parent).

A file that is not well-formed XML, or holds no article / book part, is set aside with its reason and
counted, like any malformed record.
"""

from __future__ import annotations

import re
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medagent.retrieval.reading import RawRecord, ReadContext, register_reader

# Elements whose text is not prose: tables and formulas read as noise once flattened, reference lists are
# citations, not evidence. Figure and table captions are kept (their ``<caption>`` is outside ``<table>``).
_SKIP = frozenset({"table", "disp-formula", "tex-math", "math", "ref-list", "object-id", "graphic", "media"})
# Abstract types that are not the article's summary (graphical / teaser abstracts repeat or advertise it).
_MINOR_ABSTRACTS = frozenset({"graphical", "teaser", "toc", "web-summary", "editor", "precis"})
# Children of a section that are not its own prose: headings, and nested book parts (chapters of their own).
_NOT_OWN_TEXT = frozenset({"title", "label", "sec-meta", "book-part"}) | _SKIP
_SPACE = re.compile(r"\s+")
TITLE_SEP = " — "  # between article (or book / chapter) title and section heading
HEADING_SEP = " › "  # between a section heading and its subsection's


def local(tag: Any) -> str:
    """``{http://www.w3.org/1998/Math/MathML}math`` -> ``math`` (PMC files mix namespaced MathML/XLink)."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def text_of(el: ET.Element | None) -> str:
    """All prose under ``el`` with whitespace collapsed, leaving out ``_SKIP`` elements (their tails stay:
    the sentence after an inline formula is prose)."""
    if el is None:
        return ""
    parts: list[str] = []

    def walk(node: ET.Element) -> None:
        if local(node.tag) in _SKIP:
            return
        if node.text:
            parts.append(node.text)
        for child in node:
            walk(child)
            if child.tail:
                parts.append(child.tail)

    walk(el)
    return _SPACE.sub(" ", "".join(parts)).strip()


def _child(el: ET.Element, name: str) -> ET.Element | None:
    return next((c for c in el if local(c.tag) == name), None)


def _find(el: ET.Element, path: str) -> ET.Element | None:
    """First descendant along ``a/b/c`` by local names (any depth between steps is not searched)."""
    node: ET.Element | None = el
    for name in path.split("/"):
        node = _child(node, name) if node is not None else None
    return node


@dataclass(frozen=True)
class Section:
    """One section's own text. ``path`` holds its heading and those of the sections around it."""

    path: tuple[str, ...]
    text: str


def sections(container: ET.Element, prefix: tuple[str, ...] = ()) -> Iterator[Section]:
    """The sections of a ``<body>``/``<abstract>``/``<sec>`` in document order, nested ones after their
    parent. Paragraphs that sit directly in ``container`` (a body without sections, an unstructured
    abstract) form a section whose path is ``prefix``."""
    own: list[str] = []
    nested: list[ET.Element] = []
    for child in container:
        name = local(child.tag)
        if name == "sec":
            nested.append(child)
        elif name not in _NOT_OWN_TEXT:
            own.append(text_of(child))
    text = " ".join(t for t in own if t)
    if text:
        yield Section(prefix, text)
    for i, sec in enumerate(nested, 1):
        heading = text_of(_child(sec, "title")) or text_of(_child(sec, "label")) or f"Section {i}"
        yield from sections(sec, (*prefix, heading))


def _doc_title(head: str, path: tuple[str, ...]) -> str:
    return TITLE_SEP.join(p for p in (head, HEADING_SEP.join(path)) if p)


def _records(
    key: str, head: str, parts: list[tuple[str, ET.Element]], parent: str
) -> Iterator[dict[str, Any]]:
    """Candidate documents of one article / book part: ``(label, container)`` pairs in reading order."""
    n = 0
    for label, container in parts:
        for sec in sections(container, (label,) if label else ()):
            yield {"id": f"{key}:{n}", "title": _doc_title(head, sec.path), "content": sec.text,
                   "parent_id": parent}  # fmt: skip
            n += 1


# PMC Open Access (JATS) -------------------------------------------------------------------------------
def article_records(root: ET.Element, fallback_id: str) -> Iterator[dict[str, Any]] | str:
    """The sections of one JATS ``<article>``: abstract(s) first, then the body. Returns the reason
    instead when the file holds no article or no PMC id can be found."""
    if local(root.tag) != "article":
        article = next((a for a in root.iter() if local(a.tag) == "article"), None)
        if article is None:
            return f"no <article> element (root is <{local(root.tag)}>)"
        root = article
    meta = _find(root, "front/article-meta")
    if meta is None:
        return "no <front>/<article-meta>"
    ids = {a.get("pub-id-type"): (a.text or "").strip() for a in meta if local(a.tag) == "article-id"}
    pmcid = ids.get("pmc") or ids.get("pmcid") or fallback_id
    if not pmcid:
        return "no PMC id (article-id pub-id-type=pmc) and no file name to fall back on"
    pmcid = pmcid if pmcid.upper().startswith("PMC") else f"PMC{pmcid}"
    title = text_of(_find(meta, "title-group/article-title"))
    abstracts = [a for a in meta if local(a.tag) == "abstract"]
    main = [a for a in abstracts if a.get("abstract-type") not in _MINOR_ABSTRACTS] or abstracts[:1]
    parts = [("Abstract", a) for a in main]
    body = _child(root, "body")
    if body is not None:
        parts.append(("", body))
    return _records(f"pmc:{pmcid}", title, parts, f"pmc:{pmcid}")


# Bookshelf / LitArch (BITS) ---------------------------------------------------------------------------
def _part_id(part: ET.Element) -> str:
    pid = next((p for p in part.iter() if local(p.tag) == "book-part-id"), None)
    return (pid.text or "").strip() if pid is not None and pid.text else part.get("id", "")


def book_records(root: ET.Element, fallback_id: str) -> Iterator[dict[str, Any]] | str:
    """The sections of every ``<book-part>`` (chapter) of a BITS ``<book>`` or ``<book-part-wrapper>``
    (how StatPearls ships each article). Titles read ``book — chapter — section``."""
    name = local(root.tag)
    if name not in {"book", "book-part-wrapper"}:
        return f"not a BITS book (root is <{name}>)"
    # A book's own metadata; a StatPearls wrapper also has <collection-meta>, whose title is the fallback.
    book_meta = _child(root, "book-meta")
    title_el = _find(book_meta, "book-title-group/book-title") if book_meta is not None else None
    collection = _child(root, "collection-meta")
    if title_el is None and collection is not None:
        title_el = _find(collection, "title-group/title")
    book_title = text_of(title_el)
    bid = _child(book_meta, "book-id") if book_meta is not None else None
    book_id = (bid.text or "").strip() if bid is not None and bid.text else fallback_id
    parts = [p for p in root.iter() if local(p.tag) == "book-part" and _child(p, "body") is not None]
    if not parts:
        return "no <book-part> with a <body>"

    def records() -> Iterator[dict[str, Any]]:
        for i, part in enumerate(parts):
            chapter = text_of(_find(part, "book-part-meta/title-group/title"))
            key = f"book:{book_id}:{_part_id(part) or i}"
            head = TITLE_SEP.join(t for t in (book_title, chapter) if t)
            body = _child(part, "body")
            assert body is not None  # filtered above
            yield from _records(key, head, [("", body)], key)

    return records()


# Files: loose .xml/.nxml, or tarballs of them (PMC's bulk packages, LitArch's per-book archives) ---------
def xml_members(files: list[Path]) -> Iterator[tuple[str, bytes | None, str | None]]:
    """``(name, bytes, error)`` for every XML file, reading tarballs member by member (never unpacked to
    disk, never held whole in memory)."""
    for file in files:
        if not file.name.endswith((".tar.gz", ".tgz", ".tar")):
            yield file.name, file.read_bytes(), None
            continue
        try:
            with tarfile.open(file) as tar:
                for member in tar:  # archive order is fixed, so rows and ids are stable
                    if member.isfile() and member.name.endswith((".xml", ".nxml")):
                        fh = tar.extractfile(member)
                        yield f"{file.name}:{member.name}", fh.read() if fh else b"", None
        except (tarfile.TarError, OSError, EOFError) as exc:
            yield file.name, None, f"unreadable archive ({exc.__class__.__name__}: {exc})"


def _read_xml(
    ctx: ReadContext, path: str, parse: Any, patterns: tuple[str, ...] = ("*.xml", "*.nxml", "*.tar.gz")
) -> Iterator[RawRecord]:
    files = ctx.glob(path, patterns)

    def records() -> Iterator[RawRecord]:
        row = 0
        for name, data, error in xml_members(files):
            stem = Path(name.rsplit(":", 1)[-1]).name.split(".", 1)[0]
            found: list[dict[str, Any]] = []
            if error is None:
                try:
                    result = parse(ET.fromstring(data or b""), stem)
                except ET.ParseError as exc:
                    result = f"XML parse error ({exc})"
                if isinstance(result, str):
                    error = result
                else:
                    found = list(result)  # one file's sections: small, and a count is needed
                    error = None if found else "no text (no abstract or body paragraphs)"
            if error is not None:
                row += 1
                yield RawRecord(row, {"file": name}, error)
                continue
            for rec in found:
                row += 1
                yield RawRecord(row, rec)

    return records()


@register_reader("pmc_oa")
def read_pmc_oa(ctx: ReadContext, path: str) -> Iterator[RawRecord]:
    """PubMed Central Open Access full text (JATS XML): one document per section, abstract first.

    Ids are ``pmc:<PMCID>:<n>`` (``n`` counts the article's sections in reading order); every section's
    ``parent_id`` is ``pmc:<PMCID>``. Download the OA subset's bulk packages
    (``oa_comm_xml.*.tar.gz`` from https://ftp.ncbi.nlm.nih.gov/pub/pmc/oa_bulk/) and point at them.

    Args:
        path: A ``.xml``/``.nxml`` file, a ``.tar.gz`` of them, or a folder searched recursively for both.
    """
    return _read_xml(ctx, path, article_records)


@register_reader("bookshelf")
def read_bookshelf(ctx: ReadContext, path: str) -> Iterator[RawRecord]:
    """NCBI Bookshelf / LitArch open-access books (BITS ``.nxml``; StatPearls ships one file per article):
    one document per section of each chapter, ids ``book:<book-id>:<part-id>:<n>``.

    Args:
        path: A ``.nxml``/``.xml`` file, a ``.tar.gz`` of one book, or a folder searched recursively.
    """
    return _read_xml(ctx, path, book_records)
