"""Lock-file plumbing for `make lock`, `make lock-gpu` and `make envs`.

    python requirements/locks.py from-report build/gpu-report.json requirements/gpu.lock --header "..."
    python requirements/locks.py conda-env requirements/cpu.lock envs/cpu.yaml --name chartrl-cpu

`from-report` turns the JSON report of `pip install --dry-run --report` into a pinned lock file;
`conda-env` writes a conda environment file (for `snakemake --sdm conda`) that installs exactly a lock's pins.
"""

import argparse
import json
from pathlib import Path


def pins_of(lock: Path) -> list[str]:
    return [
        line.strip() for line in lock.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def from_report(args: argparse.Namespace) -> None:
    report = json.loads(Path(args.report).read_text())
    pins = sorted(
        f"{item['metadata']['name']}=={item['metadata']['version']}"
        for item in report["install"]
        if item["metadata"]["name"].lower() != "pip"
    )
    header = [f"# {line}" for line in args.header]
    Path(args.out).write_text("\n".join(header + pins) + "\n")


def conda_env(args: argparse.Namespace) -> None:
    lines = [
        f"# Generated from {args.lock} by requirements/locks.py (`make envs`); do not edit by hand.",
        "# chartrl itself is installed by the post-deploy script beside this file.",
        *[f"# {line}" for line in args.header],
        f"name: {args.name}",
        "channels:",
        "  - conda-forge",
        "  - nodefaults",
        "dependencies:",
        "  - python=3.11",
        "  - pip",
        "  - pip:",
        *[f"      - {pin}" for pin in pins_of(Path(args.lock))],
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser("from-report")
    report.add_argument("report")
    report.add_argument("out")
    report.add_argument("--header", action="append", default=[])
    report.set_defaults(func=from_report)
    env = commands.add_parser("conda-env")
    env.add_argument("lock")
    env.add_argument("out")
    env.add_argument("--name", required=True)
    env.add_argument("--header", action="append", default=[], help="a comment line for the file's head")
    env.set_defaults(func=conda_env)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
