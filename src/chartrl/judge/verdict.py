"""Reading a verdict out of a judge's reply, tolerating chatty replies.

Accepted, in this order:

1. JSON: a ``{"verdict": "correct"|"incorrect"}`` object, alone, inside a code fence or inside prose (the last
   object that has a ``verdict`` key wins; ``true``/``false`` and ``"yes"``/``"no"`` values are read too).
2. A verdict line: the last line of the form ``VERDICT: CORRECT`` / ``Verdict: incorrect`` (markdown emphasis
   allowed), so a reply may reason first and conclude last.

Anything else (a truncated JSON object, a reply that never concludes, "VERDICT: CORRECT or INCORRECT") is
unreadable: None, which the client retries and finally counts as a judge failure.
"""

from __future__ import annotations

import json
import re

_VERDICT_WORDS = {"correct": True, "incorrect": False, "yes": True, "no": False, "true": True, "false": False}
_LINE = re.compile(r"^[\s>*_#`-]*verdict[\s*_`]*[:=][\s*_`\"']*(correct|incorrect)[\s*_`\"'.!]*$", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def _json_verdict(value: object) -> bool | None:
    if not isinstance(value, dict) or "verdict" not in value:
        return None
    verdict = value["verdict"]
    if isinstance(verdict, bool):
        return verdict
    if isinstance(verdict, str):
        return _VERDICT_WORDS.get(verdict.strip().lower())
    return None


def json_objects(text: str) -> list[object]:
    """Every JSON object that parses, found at each ``{`` of the text (and inside code fences)."""
    decoder = json.JSONDecoder()
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    objects = []
    for candidate in candidates:
        for start in (i for i, ch in enumerate(candidate) if ch == "{"):
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                continue
            objects.append(value)
    return objects


def parse_verdict(reply: str) -> bool | None:
    """True (correct), False (incorrect) or None (unreadable) for a judge reply."""
    verdicts = [v for v in map(_json_verdict, json_objects(reply)) if v is not None]
    if verdicts:
        return verdicts[-1]
    lines = [m.group(1).lower() for m in map(_LINE.match, reply.strip().splitlines()) if m]
    if lines:
        return lines[-1] == "correct"
    return None
