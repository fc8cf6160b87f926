"""verl backend and launcher benchmarks (part of `make bench`).

- Overrides: generating the verl overrides of every series of config/gpu.yaml (a job per train series and per eval
  series), and composing each against verl's `ppo_trainer` config, converting the algorithm, actor and rollout
  sections to verl's dataclasses and running verl's `validate_config` (what main_ppo does before the GPUs).
- Launcher: a local Ray head's start time (`chartrl.ray_head.start_head`, until its job API answers) and the
  per-job overhead of the Ray launcher: `chartrl launch --launcher ray -- true` as the train rule runs it, from the
  process start to its exit code (CLI start-up, submission, following the job, the final log), against the same
  command with `--launcher inline`.
- Model merger: verl's `python -m verl.model_merger merge` on a checkpoint of the tiny model in verl's FSDP layout,
  as a command (a new interpreter) against `chartrl.verl_backend.checkpoints.merge_checkpoint` (the same command
  line's `main` in a fork of the job), wall time and the CPU time of the process that merges.
"""

from __future__ import annotations

import os
import resource
import statistics
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


def bench_merger(repeats: int) -> list[str]:
    sys.path.insert(0, str(REPO / "tests" / "verl_backend"))
    from bench_dryrun import cpu
    from test_verl_checkpoints import save_verl_checkpoint

    from chartrl.config import load_config
    from chartrl.model.policy import load_policy
    from chartrl.model.tiny import build_tiny_model
    from chartrl.verl_backend.checkpoints import merge_checkpoint, merge_command

    work = Path(tempfile.mkdtemp(prefix="crl-bench-merge-"))
    config = load_config(root=REPO)
    build_tiny_model(work / "tiny", config.model, list(config.tools.names))
    policy = load_policy(work / "tiny", threads=1)
    actor = save_verl_checkpoint(work / "checkpoints", 1, policy.model, policy.processor)
    outcomes: dict[str, list[tuple[float, float]]] = {"command": [], "fork": []}

    def measure(kind: str, merge) -> None:
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        merge(work / f"{kind}-{len(outcomes[kind])}")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        outcomes[kind].append((time.perf_counter() - started, cpu))

    for _ in range(repeats):  # alternated, one at a time
        measure("command", lambda out: subprocess.run(merge_command(actor, out), check=True, capture_output=True))
        measure("fork", lambda out: merge_checkpoint(actor, out))
    same = all(
        (work / f"fork-{k}" / "model.safetensors").read_bytes()
        == (work / f"command-{k}" / "model.safetensors").read_bytes()
        for k in range(repeats)
    )
    rows = []
    for kind, what in (("command", "`python -m verl.model_merger merge ...` (a new interpreter)"),
                       ("fork", "`merge_checkpoint`: the same `main` in a fork of this process")):  # fmt: skip
        walls, cpus = [w for w, _ in outcomes[kind]], [c for _, c in outcomes[kind]]
        rows.append(f"| {what} | {summary(walls)} | {summary(cpus, 'core-s')} |")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    commit = commit.stdout.strip() or "unknown"
    ratio = statistics.median(w for w, _ in outcomes["command"]) / statistics.median(w for w, _ in outcomes["fork"])
    return [
        f"## verl's model merger: the command against a fork (the tiny model, {repeats} of each, alternated)",
        "",
        f"`{commit}`, {time.strftime('%Y-%m-%d')}, {cpu()}, alone on the machine.",
        "",
        "| merge | wall, min / median / max | CPU of the merging process |",
        "|---|---|---|",
        *rows,
        "",
        f"command / fork (median wall): **{ratio:.1f}x**; the merged weights byte for byte the same: {same}. The "
        "process that runs this bench has imported torch and transformers, as a `chartrl verl generate` job has.",
        "",
    ]


def sections(args) -> list[str]:
    return bench_overrides(args.repeats) + bench_launcher(args.repeats) + bench_merger(args.repeats)
