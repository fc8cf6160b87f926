"""The config's JSON Schema and the files it validates: read and merge YAML files as Snakemake merges
``--configfile`` overlays, validate against ``workflow/schemas/config.schema.yaml`` (the schema the Snakefile
validates with, shipped in the package as a link) with every default filled, one actionable line per problem.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema import Draft202012Validator

from chartrl.errors import ChartrlError


class ConfigError(ChartrlError, ValueError):
    """A configuration value is wrong; the message names the key, the value and the fix."""

    exit_code = 2


@cache
def config_schema() -> dict[str, Any]:
    """The JSON Schema shared with the Snakefile (shipped in the package as a link to workflow/schemas/)."""
    text = resources.files("chartrl").joinpath("schemas/config.schema.yaml").read_text()
    # libyaml's loader when PyYAML has it: the same data, about a tenth of the pure-Python parse (0.3 s of every job)
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _default_filling_validator() -> type:
    """A Draft 2020-12 validator that fills ``default`` values, as ``snakemake.utils.validate`` does."""
    validate_properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(key, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(Draft202012Validator, {"properties": set_defaults})


def merge_config(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge ``overlay`` into ``base`` (in place) the way Snakemake merges ``--configfile`` overlays:
    mappings merge key by key, every other value (lists included) replaces the old one."""
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge_config(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def read_config_files(paths: Iterable[str | Path]) -> dict[str, Any]:
    """Read and merge YAML config files in order, naming the file in every error."""
    merged: dict[str, Any] = {}
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist (working directory: {Path.cwd()})")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"config file {path} is not valid YAML: {err}") from err
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level, not {type(data).__name__}")
        merge_config(merged, data)
    return merged


def _key_path(path: Sequence[Any]) -> str:
    return ".".join(str(part) for part in path) or "<top level>"


def _describe_error(error: jsonschema.ValidationError, prefix: Sequence[str] = ()) -> str:
    """One line per schema error: the key, the bad value, what is allowed (and, for a key that takes one of
    several forms, the key's own description). ``prefix`` names where a validated fragment sits."""
    message = _describe_leaf(error, prefix)
    parent = error.parent
    if parent is not None and parent.validator in {"oneOf", "anyOf"} and "description" in parent.schema:
        message += f" ({parent.schema['description']})"
    return message


def _describe_leaf(error: jsonschema.ValidationError, prefix: Sequence[str] = ()) -> str:
    key = _key_path([*prefix, *error.absolute_path])
    value = json.dumps(error.instance, default=str)
    if len(value) > 80:
        value = value[:77] + "..."
    kind = error.validator
    if kind == "enum":
        allowed = ", ".join(str(v) for v in error.validator_value)
        return f"config key '{key}': value {value} is not allowed; allowed values: {allowed}"
    if kind == "const":
        return f"config key '{key}': value {value} must be {json.dumps(error.validator_value)}"
    if kind in {"additionalProperties", "unevaluatedProperties"}:
        known = sorted(_declared_keys(error.schema))
        unknown = sorted(set(error.instance) - set(known))
        return (
            f"config key '{key}': unknown key(s) {', '.join(unknown)}; allowed keys: {', '.join(known)} "
            "(check the spelling, or see workflow/schemas/config.schema.yaml)"
        )
    if kind == "required":
        return f"config key '{key}': {error.message}; add it (see workflow/schemas/config.schema.yaml)"
    if kind == "type":
        return f"config key '{key}': value {value} has the wrong type; expected {error.validator_value}"
    if kind in {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems"}:
        return f"config key '{key}': value {value} violates {kind} {error.validator_value}"
    if kind == "pattern":
        described = error.schema.get("description", "").split(";")[0].split(". ")[0].strip().rstrip(".")
        return f"config key '{key}': value {value} must match {error.validator_value}" + (
            f" ({described[0].lower()}{described[1:]})" if described else ""
        )
    if kind == "propertyNames":
        return f"config key '{key}': {error.message}"
    return f"config key '{key}': {error.message}"


def _declared_keys(node: Mapping[str, Any]) -> set[str]:
    """The keys an object schema declares: its ``properties`` and those of the schemas its ``allOf`` and ``$ref``
    take in (how a reward's branch takes its shared parameter groups)."""
    keys = set(node.get("properties", {}))
    if "$ref" in node:
        keys |= _declared_keys(config_schema()["$defs"][node["$ref"].split("/")[-1]])
    for part in node.get("allOf", []):
        if "if" not in part:
            keys |= _declared_keys(part)
    return keys


def _leaf_errors(errors: Iterable[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    """Expand combinator errors (allOf/if-then/oneOf) into the errors a person can act on."""
    leaves = []
    for error in errors:
        if error.context and error.validator in {"oneOf", "anyOf"}:
            leaves.extend(_leaf_errors([min(error.context, key=jsonschema.exceptions.relevance)]))
        else:
            leaves.append(error)
    return leaves


def _validate(instance: Mapping[str, Any], schema: Mapping[str, Any], prefix: Sequence[str] = ()) -> dict[str, Any]:
    resolved = copy.deepcopy(dict(instance))
    validator = _default_filling_validator()(schema)
    errors = sorted(_leaf_errors(validator.iter_errors(resolved)), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = sorted({_describe_error(e, prefix) for e in errors})
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines))
    return resolved


def validate_schema(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate against the schema and return a copy with every default filled; raise ConfigError listing
    every problem found."""
    return _validate(raw, config_schema())


def validate_fragment(instance: Mapping[str, Any], definition: str, key: str) -> dict[str, Any]:
    """Validate one section against ``$defs/<definition>`` of the schema (defaults filled), naming keys as
    ``<key>.<...>`` in errors: for sections that arrive on their own (a reward given on the command line, the
    judge settings handed to a verl reward worker)."""
    defs = config_schema()["$defs"]
    return _validate(instance, {"$defs": defs, **defs[definition]}, prefix=key.split("."))


def validate_section(name: str, data: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Validate one top-level section (``model``, ``tools``, ...) alone, defaults filled: what a job that was
    handed only its slice of the config (or nothing) runs with."""
    schema = config_schema()
    if name not in schema["properties"]:
        raise KeyError(f"unknown config section {name!r}; known: {', '.join(sorted(schema['properties']))}")
    return _validate(data or {}, {"$defs": schema["$defs"], **schema["properties"][name]}, prefix=[name])
