"""How retrieved text is shown to a model: always as DATA inside delimited blocks, never as instructions.

Every document or quote passes through ``escape_data`` first, so text from the corpus cannot close a
block and pose as our own words (an ``</document>`` in a PubMed abstract stays inside the block).
The system prompts say that block contents are untrusted data.
"""

from __future__ import annotations

from medagent.agent.memory import Evidence
from medagent.agent.services import Doc

# Look-alike angle brackets: the model still reads the text, but it cannot form our delimiters.
_ESCAPES = str.maketrans({"<": "‹", ">": "›"})


def escape_data(text: str) -> str:
    """Neutralises delimiter characters in untrusted text."""
    return text.translate(_ESCAPES)


def _attr(text: str) -> str:
    return escape_data(text).replace('"', "'").replace("\n", " ")


def document_block(handle: str, doc: Doc, max_chars: int) -> str:
    """One document, cut to ``max_chars`` characters of content (quotes are verified on the full text)."""
    content = doc.content if len(doc.content) <= max_chars else doc.content[:max_chars] + " [...]"
    return (
        f'<document id="{handle}" source="{_attr(doc.source)}" title="{_attr(doc.title)}">\n'
        f"{escape_data(content)}\n</document>"
    )


def documents_block(docs: list[tuple[str, Doc]], max_chars: int) -> str:
    return "\n\n".join(document_block(h, d, max_chars) for h, d in docs)


def evidence_block(evidence: list[Evidence]) -> str:
    """The memory bank as the final answer sees it: one block per cached, verified quote."""
    return "\n".join(
        f'<evidence id="{e.handle}" source="{_attr(e.source)}" title="{_attr(e.title)}">'
        f"{escape_data(e.quote)}</evidence>"
        for e in evidence
    )
