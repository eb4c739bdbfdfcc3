"""The cache-and-prune memory bank and quote verification."""

import pytest

from medagent.agent.memory import MemoryBank, normalize_text, verify_quote
from medagent.agent.services import Doc
from tests.unit._qa_fakes import make_docs


def test_enqueue_gives_short_handles_and_skips_documents_seen_before() -> None:
    bank = MemoryBank("q", batch_size=2, top_r=4)
    handles, dup = bank.enqueue(make_docs(3))
    assert handles == ["D1", "D2", "D3"] and dup == 0
    # Same (source, id) again: not queued twice; a new source with the same id is a different document.
    handles, dup = bank.enqueue([*make_docs(2), *make_docs(1, source="wiki")])
    assert handles == ["D4"] and dup == 2
    assert list(bank.queue) == ["D1", "D2", "D3", "D4"]


def test_review_caches_grounded_evidence_and_prunes_the_rest() -> None:
    bank = MemoryBank("q", batch_size=2, top_r=4)
    bank.enqueue(make_docs(4))
    assert bank.next_batch() == ["D1", "D2"]
    assert bank.is_reviewable("D1") and not bank.is_reviewable("D3")
    ev = bank.cache("D1", "Clopidogrel irreversibly blocks the P2Y12 receptor", verified=True)
    assert ev.doc_id == "doc1" and ev.source == "pubmed"
    bank.cache("D2", "made-up sentence", verified=False)
    # Opening the next batch prunes D2 (never grounded) and drops both texts; D1 lives on as its quote.
    assert bank.next_batch() == ["D3", "D4"]
    assert bank.pruned == ["D2"] and bank.grounded == ["D1"]
    assert "D1" not in bank.docs and "D2" not in bank.docs
    assert not bank.is_reviewable("D1")
    bank.finish()
    assert bank.pruned == ["D2", "D3", "D4"] and bank.docs == {}
    records = bank.records()
    assert [(r["handle"], r["verified"]) for r in records] == [("D1", True), ("D2", False)]


@pytest.mark.parametrize(("top_r", "batch", "bound"), [(32, 4, 8), (10, 4, 3), (4, 4, 1), (3, 4, 1)])
def test_at_most_ceil_r_over_b_batches(top_r: int, batch: int, bound: int) -> None:
    bank = MemoryBank("q", batch_size=batch, top_r=top_r)
    bank.enqueue(make_docs(100))  # more than R queued (several searches): the bound still holds
    batches = 0
    while bank.next_batch():
        batches += 1
    assert batches == bound == bank.max_batches and bank.batches_left == 0


def test_quote_verification_is_a_normalised_substring_match() -> None:
    doc = Doc(
        id="1",
        source="s",
        title="Antiplatelets",
        content="Clopidogrel  irreversibly\nblocks the P2Y12 receptor.",
    )
    assert verify_quote("clopidogrel irreversibly blocks the P2Y12 receptor", doc)
    assert verify_quote("“Clopidogrel irreversibly blocks” … P2Y12 receptor", doc)  # elision, curly quotes
    assert not verify_quote("Clopidogrel reversibly blocks the P2Y12 receptor", doc)  # paraphrase
    assert not verify_quote("P2Y12 ... Clopidogrel", doc)  # fragments out of order
    assert not verify_quote("the", doc)  # too short to mean anything
    assert normalize_text("P2Y12-receptor,  Blocks") == "p2y12 receptor blocks"


def test_bank_validates_sizes() -> None:
    with pytest.raises(ValueError):
        MemoryBank("q", batch_size=0)


def test_no_document_text_outlives_its_review() -> None:
    bank = MemoryBank("q", batch_size=2, top_r=4)
    bank.enqueue(make_docs(4))
    bank.next_batch()
    bank.cache("D1", "Clopidogrel irreversibly blocks the P2Y12 receptor", verified=True)
    bank.next_batch()
    bank.finish()
    # Nothing of the bank holds a document's content any more: only ids, titles and verified quotes.
    held = [d.content for d in (*bank.docs.values(), *bank._meta.values())]
    assert all(not c for c in held) and len(bank._meta) == 4
    assert bank.records()[0]["quote"].startswith("Clopidogrel")
