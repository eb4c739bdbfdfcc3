"""Prompts are versioned package data (YAML), rendered strictly with Jinja2.

A template that references a variable the caller did not pass raises instead of rendering an empty
string, so a prompt can never silently lose the question or the options.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import jinja2
import yaml

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)


@dataclass(frozen=True)
class PromptTemplate:
    """A named chat prompt: role -> Jinja2 template, rendered in the order given in the YAML file."""

    name: str
    version: int
    messages: tuple[tuple[str, str], ...]

    def render(self, **variables: Any) -> list[dict[str, str]]:
        """Renders every message; a missing variable raises ``jinja2.UndefinedError``."""
        return [
            {"role": role, "content": _compile(text).render(**variables).strip()}
            for role, text in self.messages
        ]


@cache
def _compile(text: str) -> jinja2.Template:
    # Compiling costs ~1 ms of CPU a message; an agent renders prompts on every turn of every question.
    return _ENV.from_string(text)


def list_prompts() -> list[str]:
    return sorted(
        p.name[: -len(".yaml")] for p in resources.files(__package__).iterdir() if p.name.endswith(".yaml")
    )


@cache
def load_prompt(name: str) -> PromptTemplate:
    """Loads ``medagent/prompts/<name>.yaml``.

    Raises:
        FileNotFoundError: No such prompt (the message lists the known ones).
        ValueError: The file does not have the ``version`` / ``messages`` layout.
    """
    path = resources.files(__package__) / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no prompt named {name!r}; known: {list_prompts()}")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    try:
        messages = tuple((str(m["role"]), str(m["content"])) for m in data["messages"])
        version = int(data["version"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"prompt {name!r} must have 'version' and 'messages: [{{role, content}}]'") from exc
    return PromptTemplate(name=name, version=version, messages=messages)


def prompt_versions() -> dict[str, dict[str, Any]]:
    """Every prompt's ``version`` and the sha256 of its file, for run manifests: an edit that forgot to
    bump the version still shows."""
    out: dict[str, dict[str, Any]] = {}
    for name in list_prompts():
        text = (resources.files(__package__) / f"{name}.yaml").read_bytes()
        out[name] = {"version": load_prompt(name).version, "sha256": hashlib.sha256(text).hexdigest()}
    for name in list_feedback():
        text = (resources.files(__package__) / "feedback" / f"{name}.yaml").read_bytes()
        out[f"feedback/{name}"] = {
            "version": load_feedback(name).version,
            "sha256": hashlib.sha256(text).hexdigest(),
        }
    return out


@dataclass(frozen=True)
class Feedback:
    """Named short texts an agent sends the model about its own turn (``prompts/feedback/<name>.yaml``)."""

    name: str
    version: int
    texts: dict[str, str]

    def text(self, key: str, **variables: Any) -> str:
        """Renders one text; an unknown key raises ``KeyError``, a missing variable ``UndefinedError``."""
        return _compile(self.texts[key]).render(**variables).strip()


def list_feedback() -> list[str]:
    folder = resources.files(__package__) / "feedback"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


@cache
def load_feedback(name: str) -> Feedback:
    """Loads ``medagent/prompts/feedback/<name>.yaml`` (``version`` and ``texts: {key: template}``)."""
    path = resources.files(__package__) / "feedback" / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no feedback named {name!r}; known: {list_feedback()}")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    try:
        return Feedback(name, int(data["version"]), {str(k): str(v) for k, v in data["texts"].items()})
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"feedback {name!r} must have 'version' and 'texts: {{key: template}}'") from exc
