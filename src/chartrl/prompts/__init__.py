"""Prompt templates (Jinja2 files beside this module), named in config and rendered strictly.

A template is ``<name>.jinja`` in this folder. Rendering raises on an undefined variable (StrictUndefined), so a
template and the code that fills it cannot drift apart silently; an unknown name raises listing the known ones.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import jinja2

SUFFIX = ".jinja"


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("chartrl", "prompts"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,  # prompts are plain text for a model, not HTML
    )


def template_names() -> list[str]:
    folder = resources.files("chartrl").joinpath("prompts")
    return sorted(p.name.removesuffix(SUFFIX) for p in folder.iterdir() if p.name.endswith(SUFFIX))


def template_source(name: str) -> str:
    """The template's text (what a prompt digest is computed from)."""
    return _load(name).source


class _Loaded:
    def __init__(self, template: jinja2.Template, source: str):
        self.template, self.source = template, source


@cache
def _load(name: str) -> _Loaded:
    names = template_names()
    if name not in names:
        raise KeyError(f"unknown prompt template {name!r}; known: {', '.join(names)}")
    environment = _environment()
    source, _, _ = environment.loader.get_source(environment, name + SUFFIX)
    return _Loaded(environment.get_template(name + SUFFIX), source)


def render(name: str, **variables: Any) -> str:
    """Render template ``name`` with ``variables`` (every variable it uses must be given)."""
    return _load(name).template.render(**variables).strip()


REPLY_FORMS = {
    "r1v": "<think>It is {answer}.</think> <answer>{answer}</answer>",
    "multiple_choice": "The answer is \\boxed{{{answer}}}",
}
"""The reply a recipe's no-tool prompt asks for, as the warm start demonstrates it (the template's own tags);
every other template is answered ``<answer>...</answer>``."""


def reply(template: str, answer: str) -> str:
    """A demonstrated reply to ``template``'s prompt with ``answer``, in the form the template asks for."""
    return REPLY_FORMS.get(template, "<answer>{answer}</answer>").format(answer=answer)
