"""The config reference (``docs/config.md``) rendered from the schema: every key with its type, default and meaning,
one section per top-level key, one table per object (a dataset source's, a reward's or a series kind's own keys in
a table of their own). ``chartrl config reference --out docs/config.md`` writes it; a test fails when the file is
not what the schema renders to.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import yaml

from chartrl.config.schema import ConfigError

HEADER = """# Configuration reference

Every key of the configuration, generated from `workflow/schemas/config.schema.yaml` (the schema Snakemake and
`chartrl config check` validate with) by `chartrl config reference --out docs/config.md`; do not edit by hand.
`config/config.yaml` and `config/series.yaml` hold the embedded default, and an overlay (`--configfile`) sets only
what it changes: mappings merge key by key, lists are replaced. A key with no default is left out unless set.
`<name>` stands for a name you choose (a dataset, a series), `<split>` for a split (train, val, test), `[]` for
each item of a list.
"""


class DuplicateKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a mapping holding one key twice (PyYAML keeps the last one silently)."""


def _no_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


DuplicateKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def load_schema_text(text: str) -> dict[str, Any]:
    """The schema, refusing duplicate keys (a ConfigError naming the key and its line)."""
    try:
        return yaml.load(text, Loader=DuplicateKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        raise ConfigError(f"the schema does not load: {error}") from None


class _Renderer:
    def __init__(self, schema: dict[str, Any]):
        self.defs: dict[str, Any] = schema.get("$defs", {})

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        """``node`` with its ``$ref`` followed (the node's own keys win) and its unconditional ``allOf`` parts'
        properties merged in after its own, in the order defaults are filled (the node's own property settings over
        theirs, key by key)."""
        while "$ref" in node:
            target = self.defs[node["$ref"].split("/")[-1]]
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        parts = [part for part in node.get("allOf", []) if "if" not in part]
        if parts:
            own = node.get("properties", {})
            properties: dict[str, Any] = dict(own)
            for part in parts:
                for key, value in self.resolve(part).get("properties", {}).items():
                    properties[key] = {**value, **own.get(key, {})}
            node = {**node, "properties": properties, "allOf": [p for p in node["allOf"] if "if" in p]}
        return node

    def ref_name(self, node: dict[str, Any]) -> str | None:
        return node["$ref"].split("/")[-1] if "$ref" in node else None

    def type_of(self, node: dict[str, Any]) -> str:
        if "const" in node:
            return f"`{json.dumps(node['const'])}`"
        name = self.ref_name(node)
        resolved = self.resolve(node)
        if "enum" in resolved:
            return "one of " + ", ".join(f"`{json.dumps(value).strip(chr(34))}`" for value in resolved["enum"])
        if "oneOf" in resolved and all("type" in alt or "$ref" in alt for alt in resolved["oneOf"]):
            return " or ".join(self.type_of(alt) for alt in resolved["oneOf"])
        kind = resolved.get("type")
        if isinstance(kind, list):
            return " or ".join(kind)
        if kind == "array":
            items = resolved.get("items", {})
            return f"list of {self.type_of(items)}" if items else "list"
        if kind == "object" and name is not None and self.has_keys(resolved):
            return f"object ({name})"
        if kind == "object" and not self.has_keys(resolved) and isinstance(resolved.get("additionalProperties"), dict):
            return f"mapping to {self.type_of(resolved['additionalProperties'])}"
        if kind is None and name is not None:
            return name
        return kind or "any"

    def has_keys(self, node: dict[str, Any]) -> bool:
        node = self.resolve(node)
        return bool(node.get("properties")) or any("if" in part for part in node.get("allOf", []))

    def bounds(self, node: dict[str, Any]) -> str:
        words = []
        for key, text in (("minimum", ">= {}"), ("exclusiveMinimum", "> {}"), ("maximum", "<= {}"),
                          ("exclusiveMaximum", "< {}"), ("minItems", "at least {} item(s)"),
                          ("maxItems", "at most {} item(s)"), ("minLength", "at least {} characters"),
                          ("pattern", "matches `{}`")):  # fmt: skip
            if key in node:
                words.append(text.format(node[key]))
        return ", ".join(words)

    def row(self, key: str, node: dict[str, Any], required: bool) -> tuple[str, str, str, str]:
        resolved = self.resolve(node)
        kind = self.type_of(node)
        bounds = self.bounds(resolved)
        if bounds:
            kind += f" ({bounds})"
        if "default" in node or "default" in resolved:
            default = f"`{json.dumps(node.get('default', resolved.get('default')))}`"
        else:
            default = "required" if required else ""
        meaning = " ".join(str(node.get("description", resolved.get("description", ""))).split())
        return f"`{key}`", kind, default, meaning

    def tables(self, node: dict[str, Any], path: str, when: str = "") -> Iterator[tuple[str, list[tuple], str]]:
        """(heading, rows, description) for the object at ``path`` and every object below it."""
        node = self.resolve(node)
        properties = node.get("properties", {})
        required = set(node.get("required", []))
        rows, below = [], []
        for key, child in properties.items():
            if child == {}:
                continue  # a branch re-admitting a key the base table lists
            rows.append(self.row(key, child, key in required))
            below.append((key, child))
        heading = f"`{path}`" + (f" when {when}" if when else "")
        if rows:
            yield heading, rows, " ".join(str(node.get("description", "")).split())
        for key, child in below:
            yield from self.children(child, f"{path}.{key}", when)
        for part in node.get("allOf", []):
            if "if" in part:
                condition = self.condition(part["if"])
                then = self.resolve(part["then"])
                own = {k: v for k, v in then.get("properties", {}).items() if k not in properties}
                then = {**then, "properties": own, "required": [k for k in then.get("required", []) if k in own]}
                then.pop("description", None)
                yield from self.tables(then, path, " and ".join(filter(None, (when, condition))))
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and not properties:
            yield from self.children(extra, f"{path}.{self.placeholder(node)}", when)

    def children(self, child: dict[str, Any], path: str, when: str = "") -> Iterator[tuple[str, list[tuple], str]]:
        resolved = self.resolve(child)
        if resolved.get("type") == "array" and isinstance(resolved.get("items"), dict):
            if self.has_keys(resolved["items"]):
                yield from self.tables(resolved["items"], f"{path}[]", when)
        elif self.has_keys(resolved):
            yield from self.tables(resolved, path, when)
        elif isinstance(resolved.get("additionalProperties"), dict) and self.has_keys(resolved["additionalProperties"]):
            yield from self.tables(resolved["additionalProperties"], f"{path}.{self.placeholder(resolved)}", when)

    def placeholder(self, node: dict[str, Any]) -> str:
        """How a key of a mapping is written in a path: ``<split>`` for split names, ``<name>`` otherwise."""
        names = self.ref_name(node.get("propertyNames", {})) or "name"
        return "<split>" if names == "split_name" else "<name>"

    def condition(self, condition: dict[str, Any]) -> str:
        words = []
        for key, value in condition.get("properties", {}).items():
            if "const" in value:
                words.append(f"`{key}: {value['const']}`")
            elif "enum" in value:
                words.append(f"`{key}` is " + " or ".join(f"`{v}`" for v in value["enum"]))
        return " and ".join(words)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_reference(schema: dict[str, Any]) -> str:
    """docs/config.md for ``schema``: a section per top-level key, a table per object."""
    renderer = _Renderer(schema)
    lines = [HEADER]
    top = schema["properties"]
    lines.append("| section | type | default | meaning |\n|---|---|---|---|")
    required = set(schema.get("required", []))
    for key, node in top.items():
        _, kind, default, meaning = renderer.row(key, node, key in required)
        lines.append(f"| [`{key}`](#{key}) | {_cell(kind)} | {_cell(default)} | {_cell(meaning)} |")
    lines.append("")
    for key, node in top.items():
        lines.append(f"## {key}\n")
        tables = list(renderer.children(node, key))
        if not tables:
            _, kind, default, meaning = renderer.row(key, node, key in required)
            lines.append(f"`{key}`: {kind}" + (f", default {default}" if default else "") + f". {meaning}\n")
            continue
        for heading, rows, description in tables:
            lines.append(f"### {heading}\n")
            if description:
                lines.append(description + "\n")
            lines.append("| key | type | default | meaning |\n|---|---|---|---|")
            lines.extend("| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows)
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
