"""The job spec a rule passes to a command as ``--spec``: JSON with the config sections the job reads and, for a
series job, the series it runs (and the train series an evaluation reads, ``of``). One reader for every command,
so every job checks its spec the same way and says the same thing when it is wrong."""

from __future__ import annotations

import json
from typing import Any

from chartrl.config import validate_section
from chartrl.errors import UsageError


def read_job_spec(
    text: str | None,
    sections: tuple[str, ...],
    *,
    entries: tuple[str, ...] = (),
    with_ids: tuple[str, ...] = (),
    holds: str = "",
) -> dict[str, Any]:
    """The job's spec, checked: its ``entries`` as given (``{}`` for one it leaves out), then each of ``sections``
    validated (the defaults for one it leaves out), then ``keep_steps`` when it names any (the checkpoint steps
    eval series read, which a train job never prunes).

    ``with_ids`` are the entries that must be there with their id; ``holds`` completes the error
    "--spec must hold ..." (what the job needs and which rule writes it). A job without entries (a model's) may
    be given no spec at all, and its spec may hold nothing but its sections."""
    try:
        spec = json.loads(text) if text else {}
    except json.JSONDecodeError as err:
        raise UsageError(f"--spec is not JSON: {err}") from err
    if not isinstance(spec, dict) or any("id" not in spec.get(entry, {}) for entry in with_ids):
        raise UsageError(f"--spec must hold {holds or 'an object of config sections'}")
    if not entries:
        unknown = set(spec) - set(sections)
        if unknown:
            raise UsageError(
                f"--spec holds unknown section(s) {', '.join(sorted(unknown))}; expected {', '.join(sections)}"
            )
    return {
        **{entry: spec.get(entry, {}) for entry in entries},
        **{name: validate_section(name, spec.get(name)) for name in sections},
        **keep_steps_of(spec),
    }


def keep_steps_of(spec: dict[str, Any]) -> dict[str, list[int]]:
    """The job spec's ``keep_steps`` (the checkpoint steps eval series name), when it has any."""
    steps = spec.get("keep_steps") or []
    if not all(isinstance(step, int) and step > 0 for step in steps):
        raise UsageError(f"--spec keep_steps must be positive step numbers, not {steps!r}")
    return {"keep_steps": sorted(steps)} if steps else {}


def given_spec(text: str | None, spec: dict[str, Any]) -> dict[str, Any]:
    """What a job depends on, for its MLflow params and resume keys: its checked spec, each section the rule gave
    with only the keys it gave. A rule gives a job only the keys of a section its output depends on (rules/common.smk,
    ``config_slice``); the defaults :func:`read_job_spec` fills in for the others are settings the job does not
    read, and logged they would pass for the study's. A section the spec leaves out entirely (a job run by hand)
    stays, with the defaults it ran with."""
    given = json.loads(text) if text else {}
    return {name: _given_keys(value, given.get(name)) for name, value in spec.items()}


def _given_keys(value: Any, given: Any) -> Any:
    if isinstance(value, dict) and isinstance(given, dict):
        return {key: item for key, item in value.items() if key in given}
    return value
