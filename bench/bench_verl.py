"""verl backend and launcher benchmarks (part of `make bench`).

- Overrides: generating the verl overrides of every series of config/gpu.yaml (a job per train series and per eval
  series), and composing each against verl's `ppo_trainer` config, converting the algorithm, actor and rollout
  sections to verl's dataclasses and running verl's `validate_config` (what main_ppo does before the GPUs).
- Launcher: a local Ray head's start time (`chartrl.ray_head.start_head`, until its job API answers) and the
  per-job overhead of the Ray launcher: `chartrl launch --launcher ray -- true` as the train rule runs it, from the
  process start to its exit code (CLI start-up, submission, following the job, the final log), against the same
  command with `--launcher inline`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, summary, timed

JOBS = 5


def bench_overrides(repeats: int) -> list[str]:
    import warnings

    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    from chartrl.config import load_config
    from chartrl.verl_backend.overrides import eval_overrides, train_overrides

    config = load_config([REPO / "config/gpu.yaml"], root=REPO)
    work = Path(tempfile.mkdtemp())

    def generate():
        found = [train_overrides(config, s.id, work) for s in config.train_series]
        return found + [eval_overrides(config, s.id, work) for s in config.eval_series]

    config_dir = Path(__import__("verl").__file__).parent / "trainer" / "config"

    def validate():
        with initialize_config_dir(config_dir=str(config_dir), version_base=None), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for overrides in generate():
                composed = compose(config_name="ppo_trainer", overrides=overrides)
                for section in (
                    composed.algorithm,
                    composed.actor_rollout_ref.actor,
                    composed.actor_rollout_ref.rollout,
                ):
                    omega_conf_to_dataclass(section)
                validate_config(composed, need_reference_policy(composed), need_critic(composed))

    validate()  # warm: imports
    return [
        f"## verl overrides (config/gpu.yaml, {len(config.series)} series)",
        "",
        "| step | min / median / max |",
        "|---|---|",
        f"| generate the overrides of all {len(config.series)} series | {summary(timed(generate, repeats * 10))} |",
        f"| generate, compose against verl's config, convert, validate them all | {summary(timed(validate, repeats))} |",
        "",
    ]


def bench_launcher(repeats: int) -> list[str]:
    from chartrl.ray_head import free_port_block, start_head, stop_head

    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO / "src")}
    starts, jobs, inline = [], [], []
    for attempt in range(max(1, repeats - 1)):
        temp_dir = Path(tempfile.mkdtemp(prefix="crl-bench-", dir="/tmp"))
        started = time.perf_counter()
        state = start_head(temp_dir, base_port=free_port_block(seed=str(temp_dir)))
        starts.append(time.perf_counter() - started)
        client_env = {**env, **state.client_env()}
        try:
            for k in range(JOBS + 1):
                command = [sys.executable, "-m", "chartrl", "launch", "--launcher", "ray", "--submission-id",
                           f"chartrl-bench-{attempt}-{k}", "--", "true"]  # fmt: skip
                begun = time.perf_counter()
                subprocess.run(command, env=client_env, check=True, capture_output=True)
                if k:  # the head's first job also starts its first worker
                    jobs.append(time.perf_counter() - begun)
        finally:
            stop_head(state)
    for _ in range(JOBS):
        begun = time.perf_counter()
        command = [
            sys.executable,
            "-m",
            "chartrl",
            "launch",
            "--launcher",
            "inline",
            "--submission-id",
            "x",
            "--",
            "true",
        ]
        subprocess.run(command, env=env, check=True, capture_output=True)
        inline.append(time.perf_counter() - begun)
    return [
        "## Launchers (a local Ray head on this machine)",
        "",
        "| what | min / median / max |",
        "|---|---|",
        f"| local head start, until its job API answers | {summary(starts)} |",
        f"| `chartrl launch --launcher ray -- true`: submit, follow, exit code | {summary(jobs)} |",
        f"| `chartrl launch --launcher inline -- true` | {summary(inline)} |",
        "",
    ]


def sections(args) -> list[str]:
    return bench_overrides(args.repeats) + bench_launcher(args.repeats)
