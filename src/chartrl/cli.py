"""``chartrl <stage> ...``: the entry points the Snakemake rules call (also ``python -m chartrl``).

Rules pass each job, as JSON (``--spec``), the resolved config its command declares it reads (``READS`` in its
module, ``chartrl.commands.spec``), so a job runs exactly the config Snakemake validated and logged, and a change to
one dataset or series reruns only its jobs. Each command group lives in ``chartrl.commands.<name>``; a failure a
person can fix prints one message and exits non-zero (2 for a bad command line or config, 1 otherwise), with no
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path

from chartrl import forkserver
from chartrl.errors import ChartrlError, Stopped, raise_on_sigterm

STAGES = {
    "config": "config", "plan": "plan", "data": "data", "tools": "tools", "reward": "reward", "model": "model",
    "warmstart": "warmstart", "warmstart-check": "warmstart_check", "rollout": "rollout", "shortcut": "shortcut",
    "train": "train", "generate": "generate", "test-accuracy": "evaluate", "test-curve": "evaluate", "score": "score",
    "diagonal": "score", "seed-diagonal": "score", "rerank": "rerank", "rerank-score": "rerank", "report": "report",
    "verl": "verl", "launch": "launch", "ray-head": "launch", "reruns": "reruns",
}  # fmt: skip
"""Each stage (``chartrl <stage>``) -> the module of ``chartrl.commands`` that adds it (``register(subparsers)``;
a module may add several), in --help's order. A job's parser loads its own stage's module alone: all of them take
some 0.6 s to import, one a tenth of that (tests/test_command_line.py checks the table against the modules)."""
COMMAND_GROUPS = tuple(dict.fromkeys(STAGES.values()))
"""The modules of ``chartrl.commands`` that add commands, in --help's order."""
QUIET_LOGGERS = ("alembic", "mlflow", "urllib3", "matplotlib", "PIL", "httpx", "datasets", "filelock")


SERVER_COMMAND = (sys.executable, "-P", "-c", "import sys, chartrl.cli; sys.exit(chartrl.cli.serve_forks(sys.argv[1]))")
"""How ``chartrl`` starts a forkserver (the socket path is appended): no folder is put on ``sys.path``."""


def serve_forks(path: str) -> int:
    """A forkserver whose jobs run :func:`main` (chartrl.forkserver)."""
    return forkserver.serve(Path(path), main)


def build_parser(stage: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser: every stage, or where ``stage`` is a known stage, the stages of its module alone (what a
    command line starting with it parses the same way)."""
    parser = argparse.ArgumentParser(
        prog="chartrl", description="chartrl: one command group per pipeline stage (the Snakemake rules call these)."
    )
    stages = parser.add_subparsers(dest="stage", required=True)
    for name in (STAGES[stage],) if stage in STAGES else COMMAND_GROUPS:
        importlib.import_module(f"chartrl.commands.{name}").register(stages)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    served = forkserver.delegate(argv, SERVER_COMMAND)  # CHARTRL_FORKSERVER=on: run in a preloaded process
    if served is not None:
        return served
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr, force=True
    )
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    raise_on_sigterm()  # a stopped job unwinds: its MLflow run ends KILLED, its temporary files are removed
    try:
        return args.func(args)
    except ChartrlError as err:
        print(f"chartrl: error: {err}", file=sys.stderr)
        return err.exit_code
    except Stopped as stop:
        print(f"chartrl: {stop}", file=sys.stderr)
        return stop.exit_code
