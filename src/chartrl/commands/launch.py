"""``chartrl launch``: run one job through a launcher (``inline`` or ``ray``); what the train and generate rules
wrap their command in. ``chartrl ray-head start|stop``: the local Ray head of a pipeline run, by hand (the
workflow's onstart/onsuccess/onerror handlers do the same in-process)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from chartrl.installation import refuse_a_stale_install
from chartrl.launch import LAUNCHERS, Job, main_command, run_job
from chartrl.ray_head import default_temp_dir, read_state, start_head, stop_head


def _names(values: list[str]) -> tuple[str, ...]:
    return tuple(sorted({name for value in values for name in value.split(",") if name}))


def cmd_run(args: argparse.Namespace) -> int:
    refuse_a_stale_install()  # every model job starts here, in the rule's environment
    job = Job(
        command=main_command(args.command),
        submission_id=args.submission_id,
        num_cpus=args.num_cpus,
        num_gpus=args.num_gpus,
        env_names=_names(args.env),
        secret_names=_names(args.secret_env),
        cwd=Path.cwd(),
    )
    options = {"address": args.ray_address, "stop_timeout_s": args.stop_timeout, "python": args.python}
    return run_job(args.launcher, job, options)


def cmd_head(args: argparse.Namespace) -> int:
    temp_dir = Path(args.temp_dir) if args.temp_dir else default_temp_dir(Path.cwd())
    if args.action == "start":
        state = start_head(
            temp_dir, base_port=args.port, num_cpus=args.num_cpus, num_gpus=args.num_gpus, python=args.python
        )
        if args.json:
            print(json.dumps(state.client_env()))
        else:
            print("\n".join(f"export {k}={v}" for k, v in state.client_env().items()))
        return 0
    state = read_state(temp_dir)
    if state is None:
        print(f"no local Ray head recorded in {temp_dir}", file=sys.stderr)
        return 0
    stop_head(state)
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    launch = stages.add_parser("launch", help="run one job inline or as a Ray job (what the train rule wraps)")
    launch.add_argument("--launcher", required=True, choices=sorted(LAUNCHERS))
    launch.add_argument("--submission-id", required=True, help="the Ray job's id (chartrl.launch.submission_id)")
    launch.add_argument("--num-cpus", type=float, default=1.0, help="CPUs Ray reserves for the job")
    launch.add_argument("--num-gpus", type=float, default=0.0, help="GPUs Ray reserves for the job")
    launch.add_argument("--env", action="append", default=[], help="variables to pass (names, comma-separated)")
    launch.add_argument(
        "--secret-env", action="append", default=[], help="variables holding secrets (names; values never logged)"
    )
    launch.add_argument("--ray-address", default=None, help="the cluster's job API (RAY_ADDRESS wins)")
    launch.add_argument("--stop-timeout", type=float, default=60.0, help="seconds to wait for a stopped job")
    launch.add_argument(
        "--python", default=None, help="the Python a Ray job's chartrl runs in (ray.python; a local head's own wins)"
    )
    launch.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    launch.set_defaults(func=cmd_run)

    head = stages.add_parser("ray-head", help="start or stop the local Ray head of a pipeline run")
    head.add_argument("action", choices=("start", "stop"))
    head.add_argument("--temp-dir", default=None, help="default: /tmp/chartrl-ray-<digest of the working directory>")
    head.add_argument("--port", type=int, default=None, help="first of 100 ports (default: a free block)")
    head.add_argument("--num-cpus", type=int, default=None)
    head.add_argument("--num-gpus", type=int, default=None)
    head.add_argument("--python", default=None, help="the Python of the environment the head runs (default: this)")
    head.add_argument("--json", action="store_true", help="print the client environment as JSON")
    head.set_defaults(func=cmd_head)
