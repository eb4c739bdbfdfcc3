"""The history-agent configs (conf/history_agent/amq.yaml, single_shot.yaml) validate against HistoryAgentConfig."""

from pathlib import Path

import pytest
import yaml
from omegaconf.errors import ConfigKeyError, ValidationError

from medagent.config import HistoryAgentConfig, InterviewEvalConfig, to_dataclass
from medagent.history import HISTORY_MODES, build_history_agent
from medagent.history.agent.phases import Rules
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician

CONF = Path(__file__).resolve().parents[2] / "conf" / "history_agent"


@pytest.mark.parametrize("name", HISTORY_MODES)
def test_history_agent_yaml_validates(name: str) -> None:
    data = yaml.safe_load((CONF / f"{name}.yaml").read_text())
    cfg = to_dataclass(HistoryAgentConfig, data)
    assert isinstance(cfg, HistoryAgentConfig) and cfg.kind == "history" and cfg.mode == name
    agent = build_history_agent(cfg, FakeClinician().model, embedder=BagOfWordsEmbedder())
    assert type(agent).mode == name
    Rules.from_config(cfg)


def test_amq_yaml_carries_the_paper_settings() -> None:
    cfg = to_dataclass(HistoryAgentConfig, yaml.safe_load((CONF / "amq.yaml").read_text()))
    assert (
        cfg.redundancy.similarity_threshold == 0.75
        and cfg.questioning.priorities == "paper"
        and cfg.max_turns >= 16
    )
    assert cfg.retrieval.mode == "hybrid" and cfg.retrieval.return_parents and "haemoptysis" in cfg.red_flags


def test_overrides_are_type_checked() -> None:
    assert (
        to_dataclass(
            HistoryAgentConfig, {"questioning": {"priorities": "physician"}, "max_turns": 8}
        ).max_turns
        == 8
    )
    with pytest.raises(ValidationError):
        to_dataclass(HistoryAgentConfig, {"max_turns": "many"})
    with pytest.raises(ConfigKeyError):
        to_dataclass(HistoryAgentConfig, {"not_a_field": 1})
    assert to_dataclass(InterviewEvalConfig, {"simulator_exchanges": None}).simulator_exchanges is None


def test_history_modes_register_their_capabilities() -> None:
    from medagent.history import history_mode, needs_history_retrieval

    amq, single = history_mode("amq"), history_mode("single_shot")
    assert (amq.asks_questions, amq.tracks_red_flags, amq.reads_context) == (True, True, False)
    assert (single.asks_questions, single.tracks_red_flags, single.reads_context) == (False, False, True)

    def cfg(mode: str, retrieval: bool) -> HistoryAgentConfig:
        return to_dataclass(HistoryAgentConfig, {"mode": mode, "retrieval": {"enabled": retrieval}})

    assert needs_history_retrieval(cfg("amq", True))
    assert not needs_history_retrieval(cfg("amq", False))
    assert not needs_history_retrieval(cfg("single_shot", True))
    with pytest.raises(KeyError, match="registered: amq, single_shot"):
        history_mode("amqq")
