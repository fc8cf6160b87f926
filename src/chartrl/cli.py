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

COMMAND_GROUPS = (
    "config", "plan", "data", "tools", "reward", "model", "warmstart", "warmstart_check", "rollout", "shortcut",
    "train", "generate", "evaluate", "score", "rerank", "report", "verl", "launch", "reruns",
)  # fmt: skip
"""The modules of ``chartrl.commands`` that add commands (each has ``register(subparsers)``), in --help's order."""
QUIET_LOGGERS = ("alembic", "mlflow", "urllib3", "matplotlib", "PIL", "httpx", "datasets", "filelock")


SERVER_COMMAND = (sys.executable, "-P", "-c", "import sys, chartrl.cli; sys.exit(chartrl.cli.serve_forks(sys.argv[1]))")
"""How ``chartrl`` starts a forkserver (the socket path is appended): no folder is put on ``sys.path``."""


def serve_forks(path: str) -> int:
    """A forkserver whose jobs run :func:`main` (chartrl.forkserver)."""
    return forkserver.serve(Path(path), main)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chartrl", description="chartrl: one command group per pipeline stage (the Snakemake rules call these)."
    )
    stages = parser.add_subparsers(dest="stage", required=True)
    for name in COMMAND_GROUPS:
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
    args = build_parser().parse_args(argv)
    raise_on_sigterm()  # a stopped job unwinds: its MLflow run ends KILLED, its temporary files are removed
    try:
        return args.func(args)
    except ChartrlError as err:
        print(f"chartrl: error: {err}", file=sys.stderr)
        return err.exit_code
    except Stopped as stop:
        print(f"chartrl: {stop}", file=sys.stderr)
        return stop.exit_code
