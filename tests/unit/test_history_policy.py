"""policy=information (expected value of each missing slot), the fixed RES split and category reachability."""

import asyncio
import json
from dataclasses import replace
from importlib import resources
from typing import Any

import numpy as np
import pytest
import yaml

from medagent.history import HistoryTakingAgent
from medagent.history.agent.build_information import main as information_main
from medagent.history.agent.information import (
    CATEGORY_PREFIX,
    InformationTable,
    build_table,
    check_disjoint,
    load_table,
    split_ids,
    split_record,
    table_path,
)
from medagent.history.agent.phases import Rules, ranked_slots, slot_values
from medagent.history.agent.state import (
    SLOT_BY_NAME,
    Answered,
    Asked,
    AskedQuestion,
    Hypothesis,
    InterviewState,
    Updated,
    transition,
)
from medagent.history.agent.value import InformationModel
from medagent.interview.annotate.lexicon import LexiconAnnotator
from medagent.interview.annotate.matcher import Lexicon
from medagent.interview.order import load_priorities
from medagent.interview.transcripts import Interview
from medagent.interview.types import INQUIRY_CATEGORIES, Turn
from tests.configs import history_agent_config
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever, ScriptedPatient

TRIAGE = ("symptom", "onset", "duration", "severity")


def _state(dx: tuple[Hypothesis, ...], *filled: str, answer: str = "I have a cough.") -> InterviewState:
    s = transition(
        InterviewState(), Asked(AskedQuestion(0, "Hello, what brings you in today?", "symptom", "triage"))
    )
    s = transition(s, Answered(answer))
    return transition(s, Updated(facts=tuple((n, "x", "x") for n in filled), differential=dx))


def _toy_table() -> InformationTable:
    """Two diagnoses: covid goes with sick contacts (exposure), asthma with smoking (habit)."""
    indicators = [CATEGORY_PREFIX + c for c in INQUIRY_CATEGORIES if c != "symptom"]
    findings = ["coughing", "wheezing", *indicators]
    n_fd = np.zeros((len(findings), 2), dtype=int)
    n_fd[0] = [20, 20]  # a hub: everyone coughs
    n_fd[1] = [1, 18]
    n_fd[findings.index("category:exposure")] = [18, 1]
    n_fd[findings.index("category:habit")] = [1, 18]
    return InformationTable(
        findings=findings,
        diagnoses=["covid", "asthma"],
        n_fd=n_fd.tolist(),
        n_d=[20, 20],
        n_interviews=40,
        iv=[0.0] * len(findings),
        physician_order=list(INQUIRY_CATEGORIES),
        positions={},
        train_ids=["RES0100"],
        eval_ids=["RES0001"],
        salt="t",
        eval_fraction=0.5,
        symptom_terms=[("cough", ["coughing"]), ("wheeze", ["wheezing"])],
        disease_terms=[("covid", ["covid"]), ("asthma", ["asthma"])],
    )


def _info_rules(table: InformationTable | None = None) -> Rules:
    rules = Rules.from_config(history_agent_config(policy="information"))
    return rules if table is None else replace(rules, information=InformationModel(table))


def test_information_policy_next_slot_depends_on_the_differential() -> None:
    rules = _info_rules(_toy_table())
    covid = _state((Hypothesis("COVID-19", 0.5), Hypothesis("asthma", 0.5)), *TRIAGE)
    first = ranked_slots(covid, rules)
    # The differential is split evenly: a finding that separates the two is worth asking. Exposure and
    # habit separate them; wheezing too, but the symptom details are in the second pass.
    assert {first[0], first[1]} == {"exposure", "habits"}
    # Once the exposure question is answered, its indicator is known: habits is the best left.
    after = transition(covid, Updated(facts=(("exposure", "my son had covid", "my son had covid"),)))
    assert ranked_slots(after, rules)[0] == "habits"
    # A differential that is already certain has no entropy to reduce: completeness gain decides (the order).
    sure = _state((Hypothesis("asthma", 1.0),), *TRIAGE)
    vals = slot_values(
        sure,
        replace(
            rules,
            cfg=replace(rules.cfg, questioning=replace(rules.cfg.questioning, information_prior_mix=0.0)),
        ),
        ["exposure"],
    )
    assert vals["exposure"].information == pytest.approx(0.0, abs=1e-12)
    # Against the order policy: paper asks medical history next, whatever the differential.
    order = Rules.from_config(history_agent_config())
    assert ranked_slots(covid, order)[0] == "medical_history" != first[0]


def test_known_findings_stop_counting() -> None:
    model = InformationModel(_toy_table())
    s = _state((), answer="Just a cough, no wheeze.")
    known = {model.findings[i] for i in model.known(s)}
    assert {"coughing", "wheezing"} <= known and "category:exposure" not in known
    asked = transition(s, Asked(AskedQuestion(1, "Any sick contacts?", "exposure", "triage", "no")))
    assert "category:exposure" in {model.findings[i] for i in model.known(asked)}


def test_packaged_table_gives_state_dependent_choices() -> None:
    rules = _info_rules()
    firsts = {
        dx: ranked_slots(_state((Hypothesis(dx, 0.8), Hypothesis("common cold", 0.2)), *TRIAGE), rules)[0]
        for dx in ("COVID-19", "asthma", "pulmonary embolism")
    }
    assert len(set(firsts.values())) > 1, firsts
    v = slot_values(_state((), *TRIAGE), rules, ["travel", "habits"])
    assert all(np.isfinite(x.value) and x.value > 0 for x in v.values())


def _run(**cfg: Any) -> Any:
    agent = HistoryTakingAgent(
        FakeClinician().model, history_agent_config(**cfg), FakeRetriever(), BagOfWordsEmbedder()
    )
    return asyncio.run(agent.run(ScriptedPatient()))


def _run_agent(**cfg: Any) -> list[str]:
    return [t.slot for t in _run(**cfg).turns]


@pytest.mark.parametrize(
    "cfg", [{"priorities": "paper"}, {"priorities": "physician"}, {"policy": "information"}]
)
def test_every_category_is_reached_within_16_turns(cfg: dict[str, Any]) -> None:
    # The scripted patient answers only the slot asked (the hardest case: nothing is filled for free).
    asked = _run_agent(max_turns=16, **cfg)
    assert len(asked) == 16
    assert {SLOT_BY_NAME[s].category for s in asked if s in SLOT_BY_NAME} == set(INQUIRY_CATEGORIES)
    assert {"exposure", "occupation", "travel", "habits", "residence"} <= set(asked)


def test_information_policy_asks_in_another_order_than_the_fixed_ones() -> None:
    paper = _run(max_turns=16)
    info = _run(max_turns=16, policy="information")
    assert [t.slot for t in info.turns] != [t.slot for t in paper.turns]
    assert {t.slot for t in info.turns} == {t.slot for t in paper.turns}  # same first pass, other order
    # Each choice says why, in the trace and in the state the patient page reads.
    assert paper.turns[0].reason == info.turns[0].reason == "opening"
    assert all(t.reason == "paper order, pass 1" for t in paper.turns[1:])
    assert all(t.reason.startswith("V=") and "completeness" in t.reason for t in info.turns[1:])
    assert info.final_state.asked[3].reason == info.turns[3].reason


def test_split_is_fixed_and_disjoint() -> None:
    ids = [f"RES{i:04d}" for i in range(1, 214)]
    train, ev = split_ids(ids, 0.25, "medagent-res-split-v1")
    assert not set(train) & set(ev) and sorted(train + ev) == ids
    # An id's side does not depend on the other ids (adding transcripts moves nobody).
    t2, e2 = split_ids(ids[:50], 0.25, "medagent-res-split-v1")
    assert set(e2) == set(ev) & set(ids[:50]) and set(t2) == set(train) & set(ids[:50])
    table = load_table()
    assert not set(table.train_ids) & set(table.eval_ids)
    assert table.n_interviews == len(table.train_ids) > 3 * len(table.eval_ids) / 2
    check_disjoint(table, table.eval_ids)
    with pytest.raises(ValueError, match="training split"):
        check_disjoint(table, [table.eval_ids[0], table.train_ids[0]])
    # The eval interview set and the physician order in priorities.yaml are copies of the table's.
    ev_cfg = yaml.safe_load(resources.files("conf").joinpath("interviews/osce_res_eval.yaml").read_text())
    assert ev_cfg["ids"] == table.eval_ids
    assert load_priorities().empirical_order == table.physician_order
    assert table.physician_order[0] == "basic_information"


def test_build_table_counts_findings_indicators_and_positions() -> None:
    symptoms = Lexicon([("cough", ["coughing"]), ("fever", ["fever"])])
    diseases = Lexicon([("covid", ["covid-19"]), ("asthma", ["asthma"])])
    annotator = LexiconAnnotator(symptoms, diseases)

    def interview(i: str, lines: list[tuple[str, str]]) -> Interview:
        return Interview(i, "fareez", tuple(Turn(n, spk, txt) for n, (spk, txt) in enumerate(lines)))

    covid = [
        ("doctor", "How old are you?"), ("patient", "I'm 40."),
        ("doctor", "Do you have a cough?"), ("patient", "Yes, a cough and a fever."),
        ("doctor", "Have you travelled anywhere recently?"), ("patient", "Yes, to Italy."),
        ("doctor", "I think this is covid. We will do a swab."), ("patient", "OK."),
    ]  # fmt: skip
    held_out = [
        ("doctor", "Do you have a cough?"),
        ("patient", "Yes."),
        ("doctor", "This is asthma."),
        ("patient", "OK."),
    ]
    t = build_table(
        [interview("A", covid), interview("B", held_out)],
        annotator,
        ["A"],
        ["B"],
        salt="s",
        eval_fraction=0.5,
        source="toy",
    )
    assert t.n_interviews == 1 and t.diagnoses == ["covid-19"] and t.train_ids == ["A"]  # B never read
    row = dict(zip(t.findings, t.n_fd, strict=True))
    assert row["coughing"] == [1] and row["fever"] == [1] and row["category:travel"] == [1]
    assert row["category:exposure"] == [0]
    assert t.physician_order[0] == "basic_information" and len(t.physician_order) == len(INQUIRY_CATEGORIES)
    # JSON round trip (NaN positions and IVs become null and come back as NaN).
    assert InformationTable.from_dict(json.loads(t.to_json())).to_json() == t.to_json()


def test_split_record_guards_runs_that_learn_from_the_training_split() -> None:
    table = load_table()
    assert split_record(history_agent_config(), [table.train_ids[0]]) is None  # paper order learns nothing
    for cfg in (history_agent_config(policy="information"), history_agent_config(priorities="physician")):
        got = split_record(cfg, table.eval_ids[:3])
        assert got is not None and got[0]["train_ids"] == table.train_ids and got[1].is_file()
        assert got[0]["evaluated_outside_eval_split"] == []
        with pytest.raises(ValueError, match="training split"):
            split_record(cfg, [table.train_ids[0]])
    # The single-shot baseline asks nothing, so nothing learned reaches it.
    assert (
        split_record(history_agent_config(mode="single_shot", policy="information"), table.train_ids) is None
    )


def test_the_packaged_table_is_what_the_cli_builds_from_the_data(data_root: Any, tmp_path: Any) -> None:
    out = tmp_path / "table.json"
    assert information_main(["--data-root", str(data_root), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == table_path(None).read_text(encoding="utf-8")


def test_the_policy_arms_have_their_own_names() -> None:
    from medagent.history.evaluation.runner import arm_name

    names = [
        arm_name(history_agent_config()),
        arm_name(history_agent_config(priorities="physician")),
        arm_name(history_agent_config(policy="information")),
        arm_name(history_agent_config(policy="information", retrieval=False)),
    ]
    assert names == ["amq", "amq:physician", "amq:information", "amq:information:no_retrieval"]


@pytest.mark.parametrize(
    ("agent", "arm"),
    [("amq", "amq"), ("amq_physician", "amq:physician"), ("amq_information", "amq:information")],
)
def test_the_three_policy_arms_compose(agent: str, arm: str) -> None:
    from medagent.history.evaluation.runner import arm_name
    from tests.unit.test_run_interviews import _compose

    cfg = _compose("run_interviews", f"history_agent={agent}", "interviews=osce_res_eval")
    assert (
        arm_name(cfg.agent) == arm
        and cfg.agent.max_turns == 16
        and cfg.interviews.ids == load_table().eval_ids
    )
    Rules.from_config(cfg.agent)  # the table and the orders load


def test_information_policy_asks_for_the_finding_it_scored() -> None:
    # An opening that names no symptom grounds no symptom slot, so the policy asks for its best finding.
    agent = HistoryTakingAgent(
        FakeClinician().model,
        history_agent_config(max_turns=16, policy="information", max_asks_per_slot=2),
        FakeRetriever(),
        BagOfWordsEmbedder(),
    )
    info = asyncio.run(agent.run(ScriptedPatient(opening="I just don't feel right.")))
    assert info.final_state.refused[0].reason == "the quote names no symptom"
    symptom = [t for t in info.turns[1:] if t.slot == "symptom"]
    assert symptom, [t.slot for t in info.turns]
    for t in symptom:  # the reason names the scored finding and the question asks about it
        finding = t.reason.split(" via ")[1]
        assert finding and finding in t.question, (t.reason, t.question)
    # The attributes have no finding of their own: their own value is the completeness gain alone.
    rules = _info_rules()
    attrs = slot_values(_state((), *TRIAGE), rules, ["onset", "duration", "symptom"])
    assert attrs["onset"].information == attrs["duration"].information == 0.0
    assert attrs["symptom"].information > 0
