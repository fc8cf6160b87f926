"""The ``--configfile`` option of the chartrl commands that read a config, as Snakemake takes it."""

from __future__ import annotations

import argparse


def add_configfile_argument(parser: argparse.ArgumentParser, help: str = "overlays, as for snakemake") -> None:
    """``--configfile`` as Snakemake takes it: several files after one flag (``--configfile config/gpu.yaml
    site.yaml``), the flag repeated, or both, merged in the order given; so a command copied from a ``snakemake``
    line reads the same overlays as the run."""
    parser.add_argument(
        "--configfile", nargs="+", action="extend", default=[], metavar="FILE", help=f"{help} (later ones win)"
    )
