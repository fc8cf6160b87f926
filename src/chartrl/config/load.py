"""Load a config: read the files, validate against the schema (defaults filled), build the typed view, run
the checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chartrl.config.checks import run_checks
from chartrl.config.schema import read_config_files, validate_schema
from chartrl.config.sections import Config, typed_config

DEFAULT_CONFIG_FILES = ("config/series.yaml", "config/config.yaml")
"""The embedded default, relative to the repository root (the top-level ``config/`` folder of YAML files): the
series first, so that config/config.yaml's own ``series:`` keys (the miniature's evaluation points) override them."""


def parse_config(raw: Mapping[str, Any]) -> Config:
    """Validate a config dict (as Snakemake holds it, or as read from files) and return its typed view."""
    config = typed_config(validate_schema(raw))
    run_checks(config)
    return config


def load_config(
    configfiles: Sequence[str | Path] = (),
    *,
    base_files: Sequence[str | Path] = DEFAULT_CONFIG_FILES,
    root: str | Path = ".",
) -> Config:
    """Load the default files (relative to ``root``) and the given overlays, in the order Snakemake merges
    ``configfile:`` directives and ``--configfile`` arguments, then validate."""
    root = Path(root)
    paths = [root / p for p in base_files] + [Path(p) for p in configfiles]
    return parse_config(read_config_files(paths))
