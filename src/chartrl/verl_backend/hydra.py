"""Python values written as Hydra override values (``key=value``), so that composing them gives the values back.

Hydra's override grammar (hydra.core.override_parser): ``true``/``false``, ``null``, numbers, quoted strings,
``[a,b]`` lists and ``{k:v}`` dicts. Strings are single-quoted unless they are plain words that Hydra cannot read
as another type, so ``e1/train`` stays readable while ``pkg://chartrl...`` and ``'42'`` keep their type.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./:@+-]*$")
_WORDS_WITH_A_TYPE = {"true", "false", "null", "none", "nan", "inf"}
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class OverrideValueError(ValueError):
    """A value Hydra's grammar cannot carry as written."""


def hydra_value(value: Any) -> str:
    """``value`` in Hydra override syntax (bools as True/False, as verl's docs write them)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise OverrideValueError(f"{value!r} is not a finite number")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if not isinstance(key, str) or not _KEY.match(key):
                raise OverrideValueError(f"dict key {key!r} is not a plain identifier")
            items.append(f"{key}:{hydra_value(item)}")
        return "{" + ",".join(items) + "}"
    if isinstance(value, Sequence):
        return "[" + ",".join(hydra_value(item) for item in value) + "]"
    raise OverrideValueError(f"cannot write a {type(value).__name__} as a Hydra value")


def _string(text: str) -> str:
    if "${" in text:
        raise OverrideValueError(f"{text!r} holds '${{', which OmegaConf would read as an interpolation")
    if _PLAIN.match(text) and text.lower() not in _WORDS_WITH_A_TYPE:
        return text
    # Hydra reads a backslash as an escape only before a quote or at the end of a quoted string
    escaped = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text).replace("'", "\\'")
    return f"'{escaped}'"


def override(key: str, value: Any, *, add: bool = False) -> str:
    """``key=value`` (``+key=value`` when the key is not in verl's config and must be added)."""
    return f"{'+' if add else ''}{key}={hydra_value(value)}"


def override_key(text: str) -> str:
    """The dotted key of an override (``+a.b=1`` -> ``a.b``)."""
    return text.split("=", 1)[0].lstrip("+~")
