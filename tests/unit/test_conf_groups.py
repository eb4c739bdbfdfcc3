"""Every YAML option of every config group composes with each pipeline's root config and converts to its
typed schema, so a key left behind by a schema change (or a typo in a YAML file) fails here, not in a run."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue

from medagent.config import AnnotateRunConfig, InterviewRunConfig, ServeConfig, SuiteRunConfig
from medagent.retrieval.config import IndexJobConfig
from pipelines.analyze_network import AnalyzeNetworkConfig
from pipelines.common import register_configs
from pipelines.report import ReportConfig
from pipelines.sim_cluster import SimClusterConfig

CONF = Path(__file__).resolve().parents[2] / "conf"
ROOTS = sorted(p.stem for p in CONF.glob("*.yaml"))

register_configs()
for _name, _node in [
    ("interview_run_schema", InterviewRunConfig),
    ("suite_schema", SuiteRunConfig),
    ("annotate_schema", AnnotateRunConfig),
    ("index_schema", IndexJobConfig),
    ("report_schema", ReportConfig),
    ("analyze_network_schema", AnalyzeNetworkConfig),
    ("sim_cluster_schema", SimClusterConfig),
    ("serve_schema", ServeConfig),
]:
    ConfigStore.instance().store(name=_name, node=_node)

# Values a root config leaves required (``???``).
REQUIRED = {"index_corpus": ["out_dir=/tmp/index"], "analyze_network": ["annotations=/tmp/annotations"]}


def _groups(root: str) -> list[tuple[str, str]]:
    """(override key, group folder) of each group in the root's defaults list (``history_agent@x.agent``
    is overridden as ``history_agent@x.agent=...``)."""
    text = (CONF / f"{root}.yaml").read_text(encoding="utf-8")
    found = re.findall(r"^  - (?:optional )?([\w@.]+): ", text, flags=re.M)
    return [(key, key.split("@")[0]) for key in found]


# The history-agent options built on another (``defaults: [amq]``) place that base at ``agent`` (its
# ``# @package agent`` header), which serve.yaml's ``interview_sessions.agent`` does not have.
SERVE_NESTED = pytest.mark.xfail(
    reason="a nested history_agent default keeps its absolute package", strict=True
)


def _cases() -> list[object]:
    cases: list[object] = []
    for root in ROOTS:
        for key, folder in _groups(root):
            for option in sorted((CONF / folder).glob("*.yaml")):
                nested = "@" in key and "defaults:" in option.read_text(encoding="utf-8")
                cases.append(
                    pytest.param(root, f"{key}={option.stem}", marks=[SERVE_NESTED] if nested else [])
                )
    return cases


@pytest.mark.parametrize(("root", "override"), _cases())
def test_every_group_option_composes_and_converts(root: str, override: str) -> None:
    overrides = [override, *REQUIRED.get(root, [])]
    if override.startswith("history_agent@interview_sessions"):
        overrides.append("interview_sessions.enabled=true")
    if override == "history_agent=single_shot_amq_transcript":
        overrides.append("agent.single_shot.transcript_run=/tmp/finished")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=root, overrides=overrides)  # a key the schema lacks fails here
    # Types, enums and each schema's own checks; a ``???`` value an option leaves for the command line (a data
    # path) is not a stale key.
    with contextlib.suppress(MissingMandatoryValue):
        OmegaConf.to_object(cfg)


def test_every_group_is_covered() -> None:
    covered = {folder for root in ROOTS for _, folder in _groups(root)}
    groups = {p.name for p in CONF.iterdir() if p.is_dir() and any(p.glob("*.yaml"))}
    # conf/interview holds data and conf/published the QA paper's values (medagent.report.published), not options.
    assert groups - covered <= {"interview", "published"}, groups - covered
