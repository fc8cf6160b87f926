"""``chartrl plan``: a verl config's budget before booking, job by job.

For every GPU job the workflow would run it prints the estimated peak memory per GPU of each phase (rollout,
log-prob, update), the GPU-hours, the disk its checkpoints take and the judge calls it makes, a total, and the
assumptions behind them (``chartrl.verl_backend.budget``). A job that does not fit its GPUs is refused when the
config loads, as ``chartrl config check`` and Snakemake refuse it, naming the key to change.
"""

from __future__ import annotations

import argparse

from chartrl.commands import add_configfile_argument
from chartrl.config import Config, load_config
from chartrl.errors import UsageError
from chartrl.verl_backend.architectures import model_architecture, unknown_architecture_note
from chartrl.verl_backend.budget import PER_TOKEN_LOOP_SECONDS, Assumptions, checkpoint_bytes, logits_path, plan_budget
from chartrl.verl_backend.checks import ignored_settings
from chartrl.verl_backend.memory import GIB

COLUMNS = (
    ("job", "<", 28),
    ("GPUs", ">", 4),
    ("rollout", ">", 7),
    ("log-prob", ">", 8),
    ("update", ">", 6),
    ("peak GiB/GPU", ">", 12),
    ("GPU-h", ">", 7),
    ("disk GB (if resumed)", ">", 20),
    ("judge calls", ">", 11),
)


def cmd_plan(args: argparse.Namespace) -> int:
    defaults = Assumptions()
    fill = defaults.fill if args.fill is None else args.fill
    throughput = defaults.tokens_per_gpu_second if args.tokens_per_gpu_second is None else args.tokens_per_gpu_second
    if not 0 < fill <= 1:
        raise UsageError(f"--fill {fill}: give the mean sequence over the longest, in (0, 1]")
    if throughput <= 0:
        raise UsageError(f"--tokens-per-gpu-second {throughput}: give a positive throughput")
    config = load_config(args.configfile, root=args.root)  # refuses a job that does not fit its GPUs
    if config.backend != "verl":
        print(f"backend {config.backend}: nothing runs on GPUs; chartrl plan budgets verl configs (backend: verl)")
        return 0
    assumptions = Assumptions(tokens_per_gpu_second=throughput, fill=fill)
    jobs = plan_budget(config, assumptions)
    print(header(config))
    print()
    print(render_table(jobs, config.verl.gpu_memory_gb))
    print()
    print("\n".join(notes(config, jobs, assumptions)))
    return 0


def header(config: Config) -> str:
    verl = config.verl
    shape = (
        f"{verl.n_gpus} GPUs of {verl.gpu_memory_gb:g} GiB (verl.nnodes {verl.nnodes} x verl.n_gpus_per_node "
        f"{verl.n_gpus_per_node}, verl.gpu_memory_gb)"
    )
    architecture = model_architecture(config.model)
    model = config.model.path or "the tiny model"
    if architecture is not None:
        model += f" ({architecture.parameters / 1e9:.2f} B parameters, sizes from {architecture.source})"
    return f"chartrl plan: {shape}; model {model}"


def _cells(values: list[str]) -> str:
    return "  ".join(f"{value:{align}{width}}" for value, (_, align, width) in zip(values, COLUMNS, strict=True))


def _gib(phases, name: str) -> str:
    found = [phase.total for phase in phases if phase.name == name]
    return f"{found[0] / GIB:.1f}" if found else "-"


def _count(value: float | None, digits: int) -> str:
    return "?" if value is None else f"{value:,.{digits}f}"


def job_row(job, device_gib: float) -> list[str]:
    phases = job.phases
    peak = f"{max(p.total for p in phases) / GIB:.1f} of {device_gib:g}" if phases else "?"
    disk = f"{job.disk_bytes / 1e9:,.0f} ({job.disk_worst_bytes / 1e9:,.0f})"
    return [
        job.job,
        str(job.gpus),
        _gib(phases, "rollout"),
        _gib(phases, "log-prob"),
        _gib(phases, "update"),
        peak,
        _count(job.gpu_hours, 1),
        disk,
        _count(job.judge_calls, 0),
    ]


def render_table(jobs, device_gib: float) -> str:
    """One row per job and a total row (GPU-hours, disk and judge calls summed; '?' where a job's is unknown)."""
    rows = [_cells([name for name, _, _ in COLUMNS])]
    rows += [_cells(job_row(job, device_gib)) for job in jobs]
    hours = [job.gpu_hours for job in jobs]
    calls = [job.judge_calls for job in jobs]
    disk = f"{sum(j.disk_bytes for j in jobs) / 1e9:,.0f} ({sum(j.disk_worst_bytes for j in jobs) / 1e9:,.0f})"
    total = [
        "total",
        "",
        "",
        "",
        "",
        "",
        _count(sum(h for h in hours if h is not None), 1) + ("+?" if None in hours else ""),
        disk,
        _count(sum(c for c in calls if c is not None), 0) + ("+?" if None in calls else ""),
    ]
    return "\n".join([*rows, _cells(total)])


def notes(config: Config, jobs, assumptions) -> list[str]:
    """What the figures assume, one line each, with where the formulas are."""
    found = [
        "memory: GiB per GPU in each phase, every sequence at its longest (prompt + response budget); the peak is "
        "the largest phase. Formulas: chartrl.verl_backend.memory (docs/cluster.md).",
        f"time: sequences x longest x fill {assumptions.fill:g} tokens at {assumptions.tokens_per_gpu_second:,.0f} "
        "tokens per GPU-second (EasyR1 v0.3.0's Qwen2.5-VL-3B/7B baseline: 8 x H100, flash-attn, 180 s a step); "
        "fill 1 is an upper bound: after the smoke run pass --fill (prompt_length/mean + response_length/mean over "
        "the longest) and --tokens-per-gpu-second (perf/throughput).",
    ]
    path = logits_path(config)
    if path == "padded":
        loop = sum(job.loop_hours for job in jobs)
        found.append(
            f"padded path (verl.attn_implementation {config.verl.attn_implementation}, no flash-attn): verl computes "
            f"log-probabilities in a per-token Python loop (logprobs_from_logits_v2); the GPU-h include {loop:,.0f} "
            f"for it (assumed {PER_TOKEN_LOOP_SECONDS * 1e6:.0f} us a token per pass, not measured), and EasyR1's "
            "throughput was measured with flash-attn: expect slower steps."
        )
    architecture = model_architecture(config.model)
    if architecture is None:
        found.append(unknown_architecture_note(config.model))
    else:
        one = checkpoint_bytes(architecture, 0) / 1e9
        found.append(
            f"disk: a full-parameter checkpoint is {one:,.1f} GB (fp32 weights 4 + AdamW states 8 bytes a "
            "parameter); kept: the newest train.keep_last and the steps eval series name, plus a bf16 merged model "
            "per evaluated checkpoint. verl prunes only what its own process saved: after a resume every earlier "
            "checkpoint stays (in brackets: every save kept)."
        )
    if any(job.gpu_hours is None or job.judge_calls is None for job in jobs if job.shape is not None):
        found.append(
            "?: a test split's size is not known before the data stage (neither evaluate.limit, a subsample nor a "
            "published size gives it); the totals leave those jobs out (+?)."
        )
    found += [f"not applied on verl: {line}" for line in ignored_settings(config)]
    calls = sum(job.judge_calls or 0 for job in jobs)
    if calls:
        judge = config.judge
        found.append(
            f"judge: {calls:,} calls to {judge.model} at {judge.base_url} ({len(judge.panel.members)} panel members "
            "each for panel rewards and scorers; validation answers included): train jobs call it from the GPU "
            "nodes' reward workers, so those need outbound internet or a judge server they reach."
        )
    return found


def register(stages: argparse._SubParsersAction) -> None:
    plan = stages.add_parser(
        "plan", help="a verl config's budget per GPU job: memory per GPU, GPU-hours, checkpoint disk, judge calls"
    )
    add_configfile_argument(plan)
    plan.add_argument("--root", default=".", help="repository root holding config/ (default: .)")
    plan.add_argument(
        "--fill", type=float, help="a sequence's mean length over its longest, for the time (default 1: an upper bound)"
    )
    plan.add_argument(
        "--tokens-per-gpu-second",
        type=float,
        help="training throughput per GPU, for the time (default: EasyR1's 3B/7B baseline on H100)",
    )
    plan.set_defaults(func=cmd_plan)
