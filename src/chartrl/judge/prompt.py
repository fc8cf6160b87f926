"""Judge prompts: a Jinja2 template (src/chartrl/prompts/<name>.jinja) filled with the item, its data quoted.

The question, the reference and the candidate answer are data: the template puts each inside its own tags and
says so. Text that would close or open one of those tags is neutralised before rendering, so a candidate
cannot end its own block and speak outside it (a prompt-injection route).
"""

from __future__ import annotations

import hashlib
import re
from functools import cache

from chartrl import prompts
from chartrl.judge.base import JudgeItem

DATA_TAGS = ("question", "reference_answer", "candidate_answer", "candidate_response")
_TAG = re.compile(r"<\s*/?\s*(?:" + "|".join(DATA_TAGS) + r")\b[^>]*>", re.IGNORECASE)
NEUTRALISED_TAG = "[tag removed]"


def quote_data(text: str) -> str:
    """``text`` with every opening or closing data tag replaced by a marker (the text is otherwise kept)."""
    return _TAG.sub(NEUTRALISED_TAG, text)


def judge_prompt(template: str, item: JudgeItem, json_mode: bool) -> str:
    """The user message for ``item``."""
    return prompts.render(
        template,
        question=quote_data(item.question),
        reference=quote_data(item.reference),
        response=quote_data(item.response),
        json_mode=json_mode,
    )


@cache
def template_digest(template: str) -> str:
    """sha256 of the template's source: part of the cache key, so editing a prompt never reuses old verdicts."""
    return hashlib.sha256(prompts.template_source(template).encode()).hexdigest()
