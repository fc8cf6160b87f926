"""``chartrl plan``: a verl config's budget before booking, job by job.

For every GPU job the workflow would run it prints the estimated peak memory per GPU of each phase (rollout,
log-prob, update), the GPU-hours (a central estimate and a range), the disk its checkpoints take and the judge calls
it makes, a total, and the assumptions behind them (``chartrl.verl_backend.budget``). A job that does not fit its
GPUs is refused when the config loads, as ``chartrl config check`` and Snakemake refuse it, naming the key to
change.
"""

from __future__ import annotations

import argparse

from chartrl.commands.overlays import add_configfile_argument
from chartrl.config import Config, load_config
from chartrl.errors import UsageError
from chartrl.verl_backend.architectures import model_architecture, unknown_architecture_note
from chartrl.verl_backend.budget import Assumptions, checkpoint_bytes, logits_path, plan_budget
from chartrl.verl_backend.gpu_hours import MEASURED_RANGE, RATES, UNPRICED_LOOP
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
    ("(range)", "<", 15),
    ("disk GB (peak)", ">", 20),
    ("judge calls", ">", 11),
)


def cmd_plan(args: argparse.Namespace) -> int:
    fill, throughput = args.fill, args.tokens_per_gpu_second
    if fill is not None and not 0 < fill <= 1:
        raise UsageError(f"--fill {fill}: give the mean sequence over the longest, in (0, 1]")
    if fill is not None and throughput is None:
        raise UsageError("--fill needs --tokens-per-gpu-second: both come from the smoke run (its e1 job prints them)")
    if throughput is not None and throughput <= 0:
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


def _range(hours) -> str:
    return "" if hours is None else f"({hours.low:,.1f}-{hours.high:,.1f})"


def job_row(job, device_gib: float) -> list[str]:
    phases = job.phases
    peak = f"{max(p.total for p in phases) / GIB:.1f} of {device_gib:g}" if phases else "?"
    disk = f"{job.disk_bytes / 1e9:,.0f} ({job.disk_peak_bytes / 1e9:,.0f})"
    return [
        job.job,
        str(job.gpus),
        _gib(phases, "rollout"),
        _gib(phases, "log-prob"),
        _gib(phases, "update"),
        peak,
        _count(None if job.gpu_hours is None else job.gpu_hours.central, 1),
        _range(job.gpu_hours),
        disk,
        _count(job.judge_calls, 0),
    ]


def render_table(jobs, device_gib: float) -> str:
    """One row per job and a total row (GPU-hours, disk and judge calls summed; '?' where a job's is unknown)."""
    rows = [_cells([name for name, _, _ in COLUMNS])]
    rows += [_cells(job_row(job, device_gib)) for job in jobs]
    hours = [job.gpu_hours for job in jobs]
    known = [h for h in hours if h is not None]
    total_hours = sum(known[1:], known[0]) if known else None
    calls = [job.judge_calls for job in jobs]
    kept = sum(j.disk_bytes for j in jobs)
    # one job writes at a time on a node it fills; each further job running beside it adds its own checkpoint
    peak = kept + max((j.disk_peak_bytes - j.disk_bytes for j in jobs), default=0.0)
    disk = f"{kept / 1e9:,.0f} ({peak / 1e9:,.0f})"
    total = [
        "total",
        "",
        "",
        "",
        "",
        "",
        _count(None if total_hours is None else total_hours.central, 1) + ("+?" if None in hours else ""),
        _range(total_hours),
        disk,
        _count(sum(c for c in calls if c is not None), 0) + ("+?" if None in calls else ""),
    ]
    return "\n".join([*rows, _cells(total)])


def notes(config: Config, jobs, assumptions) -> list[str]:
    """What the figures assume, one line each, with where the formulas are."""
    found = [
        "memory: GiB per GPU in each phase, every sequence at its longest (prompt + response budget); the peak is "
        "the largest phase. Formulas: chartrl.verl_backend.memory (docs/cluster.md).",
        time_note(assumptions),
    ]
    path = logits_path(config)
    if path == "padded" and not assumptions.measured:
        found.append(
            f"padded path (verl.attn_implementation {config.verl.attn_implementation}, no flash-attn): a micro-batch "
            f"is computed at its longest sequence (priced); verl's log-probability loop is {UNPRICED_LOOP}."
        )
    architecture = model_architecture(config.model)
    if architecture is None:
        found.append(unknown_architecture_note(config.model))
    else:
        one = checkpoint_bytes(architecture, 0) / 1e9
        found.append(
            f"disk: a full-parameter checkpoint is {one:,.1f} GB (fp32 weights 4 + AdamW states 8 bytes a "
            "parameter); kept: the newest train.keep_last and the steps eval series name, plus a bf16 merged model "
            "per evaluated checkpoint; a resumed run keeps no more (chartrl verl train deletes an earlier attempt's "
            "checkpoints once keep_last newer ones replace them). In brackets: the peak, one checkpoint more while "
            "the next is written. Checkpoints of other inputs moved to superseded/ are never deleted nor counted."
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


def time_note(assumptions: Assumptions) -> str:
    if assumptions.measured:
        fill = "the config's central tokens" if assumptions.fill is None else f"fill {assumptions.fill:g}"
        return (
            f"time: from measured figures: sequences x longest x {fill} at {assumptions.tokens_per_gpu_second:,.0f} "
            f"tokens per GPU-second; the range is {MEASURED_RANGE[0]:g}-{MEASURED_RANGE[1]:g} times it (response "
            "lengths drift over a study's steps). Book on the range's top plus a lost allocation (docs/cluster.md)."
        )
    central = RATES["central"]
    return (
        "time: each trajectory's prompt and tool observations prefilled, its answer decoded and, in a train job, "
        "every pass of the update priced apart (chartrl.verl_backend.gpu_hours): central at "
        f"{central.prefill_tokens_per_second:,.0f} prefill and {central.decode_tokens_per_second:,.0f} decode tokens "
        f"per GPU-second and {central.flops_utilisation:.0%} of the bf16 peak in training, half the response cap per "
        "pass; the range from short answers without tool calls at faster rates to every pass at its cap at slower "
        "ones. Not measured: after the smoke run, re-plan with the --fill and --tokens-per-gpu-second its e1 job "
        "prints."
    )


def register(stages: argparse._SubParsersAction) -> None:
    plan = stages.add_parser(
        "plan", help="a verl config's budget per GPU job: memory per GPU, GPU-hours, checkpoint disk, judge calls"
    )
    add_configfile_argument(plan)
    plan.add_argument("--root", default=".", help="repository root holding config/ (default: .)")
    plan.add_argument(
        "--fill",
        type=float,
        help="a sequence's mean length over its longest, measured (the smoke run's train job prints it); "
        "needs --tokens-per-gpu-second",
    )
    plan.add_argument(
        "--tokens-per-gpu-second",
        type=float,
        help="verl's perf/throughput, measured (the smoke run's train job prints it); without it the time is "
        "estimated from the tokens the config implies",
    )
    plan.set_defaults(func=cmd_plan)
