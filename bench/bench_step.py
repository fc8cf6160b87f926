"""A training step's cost, phase by phase, against what the CPU can do (part of `make bench`): one train step of the
embedded default's e1 and one warm-start step of each kind (perception + text, protocol), on this checkout's
`make run` results (its warm start, its splits).

For each phase: the wall seconds per step (median over repeats), the floating-point work counted from the shapes of
the matrix products, convolutions and attentions the phase runs (a dispatch mode sees every aten call), the
GFLOP/s that work achieved, and the time the same work would take at the peak that this process measures for the
model's own matrix shapes (``torch.mm`` of each shape, at the same thread count). The ratio of the two is how far
the phase is from the CPU's limit. Attention and convolutions are priced at the best matrix-product rate measured
(no shape of theirs is timed on its own). Elementwise work (norms, activations, softmax, sampling) is not counted:
it shows as time with no GFLOP.

Each repeat runs the step from the same state (the model and optimiser are restored before it), so the repeats and
the counting pass do the same work.
"""

from __future__ import annotations

import copy
import re
import statistics
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path

from common import REPO

TRAIN_SERIES = "e1"
WARM_STEPS = {"perception + text": 0, "protocol": 500}


# ---------------------------------------------------------------------------------------------------------------
# Phases: exclusive wall time and counted work, by the phase innermost on a stack
# ---------------------------------------------------------------------------------------------------------------


class Phases:
    def __init__(self):
        self.stack: list[str] = []
        self.seconds: dict[str, float] = defaultdict(float)
        self.flops: dict[str, float] = defaultdict(float)
        self.mm_shapes: Counter = Counter()  # (m, k, n) -> flops
        self._mark = None

    def _switch(self) -> None:
        now = time.perf_counter()
        if self.stack and self._mark is not None:
            self.seconds[self.stack[-1]] += now - self._mark
        self._mark = now

    @contextmanager
    def phase(self, name: str):
        self._switch()
        self.stack.append(name)
        try:
            yield
        finally:
            self._switch()
            self.stack.pop()

    def current(self) -> str:
        return self.stack[-1] if self.stack else "other"


def _wrap(owner, name: str, phases: Phases, label, restore: list):
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        with phases.phase(label(*args, **kwargs) if callable(label) else label):
            return original(*args, **kwargs)

    setattr(owner, name, wrapper)
    restore.append((owner, name, original))


@contextmanager
def patched(patches):
    restore: list = []
    try:
        for owner, name, phases, label in patches:
            _wrap(owner, name, phases, label, restore)
        yield
    finally:
        for owner, name, original in reversed(restore):
            setattr(owner, name, original)


def counting(phases: Phases):
    """A dispatch mode adding each matrix product's, convolution's and attention's work to the current phase."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    aten = torch.ops.aten
    mm_like = {aten.mm, aten.addmm}
    attention = {aten._scaled_dot_product_flash_attention_for_cpu: 1.0}
    backward = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None)
    if backward is not None:
        attention[backward] = 2.0

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func._overloadpacket
            flops = 0.0
            if packet in flop_registry:
                flops = float(flop_registry[packet](*args, **kwargs, out_val=out))
                if packet in mm_like:
                    a, b = (args[0], args[1]) if packet is aten.mm else (args[1], args[2])
                    phases.mm_shapes[(a.shape[0], a.shape[1], b.shape[1])] += flops
            elif packet in attention:
                q, k = (args[0], args[1]) if attention[packet] == 1.0 else (args[1], args[2])
                flops = attention[packet] * 4.0 * q.numel() * k.shape[-2]  # QK^T and PV: 2 x 2 x B H Lq Lk D
            phases.flops[phases.current()] += flops
            return out

    return Count()


@contextmanager
def _no_inference_mode():
    """``torch.inference_mode`` as ``torch.no_grad`` (the same operations): a dispatch mode does not see the
    operations of inference mode, where sampling runs."""
    import torch

    original = torch.inference_mode
    torch.inference_mode = torch.no_grad
    try:
        yield
    finally:
        torch.inference_mode = original


def mm_peaks(shapes: Counter, budget: float = 0.03) -> dict[tuple[int, int, int], float]:
    """GFLOP/s of ``torch.mm`` for each (m, k, n) that carries work, at this process's thread count: the shapes
    holding 99% of the counted matrix work, at most 40 of them."""
    import torch

    total, chosen, covered = sum(shapes.values()), [], 0.0
    for shape, flops in shapes.most_common(40):
        chosen.append(shape)
        covered += flops
        if covered >= 0.99 * total:
            break
    peaks = {}
    for m, k, n in chosen:
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(3):
            torch.mm(a, b)
        runs, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < budget or runs < 5:
            torch.mm(a, b)
            runs += 1
        peaks[(m, k, n)] = 2.0 * m * k * n * runs / elapsed / 1e9
    return peaks


def limit_seconds(phases: Phases, peaks: dict) -> dict[str, float]:
    """Each phase's counted work at the measured peaks: its matrix products at their own shape's rate (a shape not
    timed at the work-weighted median rate), the rest at the best rate."""
    if not peaks:
        return {}
    best = max(peaks.values())
    weights = sorted((rate, phases.mm_shapes[s]) for s, rate in peaks.items())
    half, acc, median = sum(w for _, w in weights) / 2, 0.0, weights[-1][0]
    for rate, weight in weights:
        acc += weight
        if acc >= half:
            median = rate
            break
    shape_share = {s: f / sum(phases.mm_shapes.values()) for s, f in phases.mm_shapes.items()}
    # the matrix share of every phase is priced at the shapes' mix (phases share the model's shapes)
    mix_rate = 1.0 / sum(share / peaks.get(s, median) for s, share in shape_share.items())
    return {name: flops / (min(mix_rate, best) * 1e9) for name, flops in phases.flops.items()}


# ---------------------------------------------------------------------------------------------------------------
# The steps
# ---------------------------------------------------------------------------------------------------------------


def _config():
    import yaml
    from snakemake.utils import update_config

    from chartrl.workflow import checked_config

    config = yaml.safe_load((REPO / "config/series.yaml").read_text())
    update_config(config, yaml.safe_load((REPO / "config/config.yaml").read_text()))
    return checked_config(config)


def _results(where: str | None) -> Path:
    results = Path(where) if where else REPO / "results"
    needed = [
        results / "models/base",
        results / "data/synthchart/train.parquet",
        results / "data/synthchart/val.parquet",
    ]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        raise SystemExit(f"bench_step needs `make run`'s results: missing {', '.join(missing)}")
    return results


def _trainer(config, results: Path, workdir: Path):
    """e1's trainer, built as `chartrl train` builds it (chartrl.commands.train), on the results' model and splits."""
    from chartrl.commands.spec import read_job_spec
    from chartrl.commands.train import READS, job_trainer, train_job
    from chartrl.config import MlflowSettings
    from chartrl.workflow import OMIT, job_spec, to_plain

    spec = read_job_spec(
        job_spec(
            "train",
            config,
            sections={"train": config.train_section(TRAIN_SERIES), "judge": OMIT},
            series={"id": TRAIN_SERIES, **to_plain(config.resolved["series"][TRAIN_SERIES])},
        ),
        READS["train"],
    )
    job = train_job(
        spec,
        logged=spec,
        run_dir=workdir / "run",
        mlflow=MlflowSettings(tracking_uri=f"sqlite:///{workdir}/mlflow.db", experiment="bench"),
        base_model=str(results / "models/base"),
        inputs={"train": results / "data/synthchart/train.parquet", "val": results / "data/synthchart/val.parquet"},
    )
    return job_trainer(job, spec["judge"]), job.train


def _train_patches(trainer, phases: Phases):
    import torch

    from chartrl.model import batching
    from chartrl.rollout import episodes, kv_reuse
    from chartrl.train import trainer as trainer_module

    calls = {"sample": 0}

    def sample_label(*args, **kwargs):
        calls["sample"] += 1
        return f"pass-{calls['sample']} sampling"

    def run_label(*args, **kwargs):
        calls["sample"] = 0
        return phases.current() if phases.stack else "other"

    def logprob_label(model, *args, **kwargs):
        return "reference log-probs" if model is trainer.reference else "policy forward"

    patches = [
        (episodes, "run_episodes", phases, run_label),
        (trainer_module, "run_episodes", phases, run_label),
        (episodes, "sample", phases, sample_label),
        (episodes, "_tool_turn", phases, "tool execution"),
        (kv_reuse, "image_pixels", phases, "image re-encoding"),
        (batching, "image_pixels", phases, "image re-encoding"),
        (trainer_module, "response_logprobs", phases, logprob_label),
        (torch.Tensor, "backward", phases, "backward"),
        (torch.nn.utils, "clip_grad_norm_", phases, "optimizer"),
        (trainer.optimizer, "step", phases, "optimizer"),
    ]
    return [p for p in patches if hasattr(p[0], p[1])]


def _warm_patches(optimizer, phases: Phases):
    import torch

    from chartrl.warmstart import supervised

    return [
        (supervised, "step_demonstrations", phases, "demonstrations (render, tools, tokens)"),
        (supervised, "supervised_loss", phases, "forward"),
        (torch.Tensor, "backward", phases, "backward"),
        (torch.nn.utils, "clip_grad_norm_", phases, "optimizer"),
        (optimizer, "step", phases, "optimizer"),
    ]


def _snapshot(*objects):
    return [copy.deepcopy(o.state_dict()) for o in objects]


def _restore(objects, states):
    for o, s in zip(objects, states, strict=True):
        o.load_state_dict(copy.deepcopy(s))


def measure(run_step, patches_of, state_objects, repeats: int) -> tuple[dict, Phases, float]:
    """Seconds per phase (median over ``repeats``, each from the same state), the counted pass's phases, and the
    step's total wall seconds (median)."""

    states = _snapshot(*state_objects)
    per_phase: dict[str, list[float]] = defaultdict(list)
    totals = []
    for _ in range(repeats):
        _restore(state_objects, states)
        phases = Phases()
        with patched(patches_of(phases)), phases.phase("other"):
            started = time.perf_counter()
            run_step()
            totals.append(time.perf_counter() - started)
        for name, seconds in phases.seconds.items():
            per_phase[name].append(seconds)
    _restore(state_objects, states)
    counted = Phases()
    with patched(patches_of(counted)), counted.phase("other"), counting(counted), _no_inference_mode():
        run_step()
    _restore(state_objects, states)
    return {k: statistics.median(v) for k, v in per_phase.items()}, counted, statistics.median(totals)


def _table(title: str, seconds: dict, counted: Phases, peaks: dict, total: float, order: list[str]) -> list[str]:
    limits = limit_seconds(counted, peaks)
    names = [n for n in order if n in seconds or n in counted.flops] + sorted(
        set(seconds) | set(counted.flops) - set(order)
    )
    lines = [
        f"### {title}",
        "",
        "| phase | s per step | share | GFLOP | achieved GFLOP/s | s at peak | x over the limit |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in dict.fromkeys(names):
        s, flops = seconds.get(name, 0.0), counted.flops.get(name, 0.0)
        limit = limits.get(name, 0.0)
        achieved = f"{flops / s / 1e9:.1f}" if s > 0 and flops > 0 else "-"
        over = f"{s / limit:.1f}" if limit > 0 else "-"
        lines.append(f"| {name} | {s:.3f} | {s / total:.0%} | {flops / 1e9:.2f} | {achieved} | {limit:.3f} | {over} |")
    all_flops = sum(counted.flops.values())
    all_limit = sum(limits.values())
    lines.append(
        f"| **step** | **{total:.3f}** | 100% | **{all_flops / 1e9:.2f}** | **{all_flops / total / 1e9:.1f}** | "
        f"**{all_limit:.3f}** | **{total / all_limit:.1f}** |"
        if all_limit
        else f"| **step** | **{total:.3f}** | 100% | | | | |"
    )
    return lines + [""]


def _decode_batches(trainer, step: int) -> list[tuple[int, int, int, int, bool]]:
    """The decoding loops of train step ``step`` (its two sampled passes; the state restored after): per
    ``continue_batch`` call, ``(rows, decoding steps, row-steps the model ran, tokens fed back, greedy)``."""
    from chartrl.rollout import kv_reuse

    seen: list[tuple[int, int, int, int, bool]] = []
    original = kv_reuse.continue_batch

    def recorded(policy, sequences, caches, params, stop_ids, keep_cache):
        calls: list[int] = []
        hook = policy.model.register_forward_pre_hook(
            lambda module, args, kwargs: calls.append(kwargs["input_ids"].shape[0]), with_kwargs=True
        )
        try:
            result = original(policy, sequences, caches, params, stop_ids, keep_cache)
        finally:
            hook.remove()
        completions = result[0]
        steps = completions.shape[1]
        # tokens a row needed: up to its stop token, or every step when it never stopped
        needed = sum(kv_reuse.fed_tokens(row, stop_ids, steps + 1) for row in completions.tolist())
        # the first call is the prefill (its logits give the first token); each further call decodes one token a row
        seen.append((completions.shape[0], steps, sum(calls[1:]) + len(sequences), needed, params.greedy))
        return result

    states = _snapshot(trainer.model, trainer.optimizer)
    kv_reuse.continue_batch = recorded
    try:
        trainer.train_step(step)
    finally:
        kv_reuse.continue_batch = original
        _restore([trainer.model, trainer.optimizer], states)
    return seen


class _Decoder:
    """A prefill of ``ids`` under ``mask`` (left padding as 0), then one token per row a step, as the sampler feeds
    the model (a key/value cache, the attention mask, ``logits_to_keep=1``); each call returns the last logits."""

    def __init__(self, policy, ids, mask, reserve: int):
        import torch

        from chartrl.model.positions import vl_model
        from chartrl.rollout.cache import appending_cache

        self.model, self.mask = policy.model, mask
        self.rows, self.length = mask.shape
        self.cache = appending_cache(vl_model(policy).config, reserve=reserve)
        positions = torch.arange(self.length).view(1, 1, -1).expand(3, self.rows, self.length)
        self.prefill = self._forward(ids, positions)

    def _forward(self, input_ids, position_ids):
        out = self.model(input_ids=input_ids, attention_mask=self.mask, position_ids=position_ids,
                         past_key_values=self.cache, use_cache=True, logits_to_keep=1)  # fmt: skip
        return out.logits[:, -1]

    def step(self, tokens):
        """Feed ``tokens`` (rows, 1) at the next position."""
        import torch

        position = self.mask.shape[1]
        self.mask = torch.cat([self.mask, torch.ones(self.rows, 1, dtype=torch.long)], dim=1)
        return self._forward(tokens, torch.full((3, self.rows, 1), position))


def _decode_step(policy, rows: int, context: int, steps: int = 40) -> tuple[float, float]:
    """One decoding step of ``rows`` rows after a ``context``-token prefill, as the sampler runs it: median wall ms,
    and the attention kernel's share of the profiled step's operator time."""
    import torch

    generator = torch.Generator().manual_seed(0)
    times = []
    with torch.no_grad():
        ids = torch.randint(10, 1000, (rows, context), generator=generator)
        decoder = _Decoder(policy, ids, torch.ones(rows, context, dtype=torch.long), reserve=steps + 1)
        for k in range(steps):
            token = torch.randint(10, 1000, (rows, 1), generator=generator)
            if k == steps - 1:
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
                    decoder.step(token)
            else:
                started = time.perf_counter()
                decoder.step(token)
                times.append(time.perf_counter() - started)
    events = profile.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    attention = sum(e.self_cpu_time_total for e in events if "scaled_dot_product" in e.key)
    return statistics.median(times) * 1e3, attention / total if total else 0.0


def _subset_identical(policy, threads: int, rows: int = 32, context: int = 150) -> list[int]:
    """The sizes ``n`` (1..rows) for which the last ``n`` rows of a batch, decoded as a batch of their own, give the
    same logits to the bit as in the whole batch (prefill and four decoding steps), at ``threads`` threads."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(10, 1000, (rows, context + 4), generator=generator)
    mask = torch.ones(rows, context, dtype=torch.long)
    for row in range(rows):
        mask[row, : row % 7] = 0  # left padding, as a sampled batch has

    def logits(chosen: list[int]):
        with torch.no_grad():
            decoder = _Decoder(policy, ids[chosen, :context], mask[chosen], reserve=5)
            steps = [decoder.step(ids[chosen, context + k : context + k + 1]) for k in range(4)]
        return torch.stack([decoder.prefill, *steps], dim=1)

    try:
        whole = logits(list(range(rows)))
        return [n for n in range(1, rows + 1) if torch.equal(whole[rows - n :], logits(list(range(rows - n, rows))))]
    finally:
        torch.set_num_threads(previous)


def _sampling_lines(trainer, results: Path, step: int) -> list[str]:
    """Where the sampled passes' decoding time goes: the share of decode row-steps spent on rows that had stopped,
    a decoding step's cost and its attention kernel's share, and which batch sizes leave a row's logits unchanged."""
    from chartrl.model.policy import load_policy
    from chartrl.rollout import kv_reuse

    kept = sorted((results / f"runs/{TRAIN_SERIES}/checkpoints").glob("step_*"), key=lambda p: int(p.name[5:]))
    runs = [(f"step {step}, from the warm start", step, None)]
    if kept:  # a late step: from the last kept checkpoint but one (the last is the run's end)
        late = kept[-2] if len(kept) > 1 else kept[-1]
        at = int(late.name[5:]) + 1
        runs.append((f"step {at}, from the run's kept `{late.name}`", at, late))
    lines = [
        f"### {TRAIN_SERIES}: the sampled passes' decoding",
        "",
        "A decoding loop draws one `multinomial` sample per step for every row of its batch until the last row "
        "stops, so that a fixed seed draws the same numbers; rows that have stopped leave the model's batch once "
        f"the rows still going are at most {kv_reuse.DROP_SHARE:.0%} of those it runs (never fewer than "
        f"{kv_reuse.MIN_ROWS} rows). Row-steps, summed over the step's `continue_batch` calls: all rows x decoding "
        "steps (every row decoded to the end); run: the rows the model ran, the prefill's logits counted as each "
        "row's first step; needed: the tokens up to each row's stop.",
        "",
        "| train step | pass | batches (rows x steps) | all row-steps | run | needed | needed / run |",
        "|---|---|---|---|---|---|---|",
    ]
    states = _snapshot(trainer.model, trainer.optimizer)
    try:
        for label, at, checkpoint in runs:
            if checkpoint is not None:
                trainer.model.load_state_dict(load_policy(checkpoint, train=True).model.state_dict())
            batches = _decode_batches(trainer, at)
            # a step's calls: pass 1 over its prompts x rollout.n rows, then pass 2 (the rows that called a tool)
            pass_one, first_pass_rows = [], trainer.job.train.prompts_per_step * trainer.job.rollout.n
            while batches and sum(b[0] for b in pass_one) < first_pass_rows:
                pass_one.append(batches.pop(0))
            for name, group in (("pass 1", pass_one), ("pass 2", batches)):
                if not group:
                    continue
                row_steps = sum(r * s for r, s, _, _, _ in group)
                run = sum(g[2] for g in group)
                needed = sum(g[3] for g in group)
                shapes = ", ".join(f"{r} x {s}" for r, s, _, _, _ in group)
                lines.append(f"| {label} | {name} | {shapes} | {row_steps} | {run} | {needed} | {needed / run:.0%} |")
    finally:
        _restore([trainer.model, trainer.optimizer], states)
    rows = trainer.job.rollout.batch_size
    ms, attention = _decode_step(trainer.policy, rows, 200)
    small_ms, _ = _decode_step(trainer.policy, 8, 200)
    identical = {t: _subset_identical(trainer.policy, t, rows) for t in (1, 2)}

    def sizes(found: list[int]) -> str:
        missing = [n for n in range(1, rows + 1) if n not in found]
        return "all" if not missing else ("none" if len(missing) == rows else f"all but {missing}")

    lines += [
        "",
        f"One decoding step after a 200-token prefill: {ms:.2f} ms at {rows} rows, {small_ms:.2f} ms at 8 rows; the "
        f"attention kernel (`scaled_dot_product_attention`, one query token per row) is {attention:.0%} of the "
        f"{rows}-row step's operator time. Row subsets of a {rows}-row batch decoded on their own give the same "
        f"logits to the bit for these sizes: {sizes(identical[1])} at 1 thread; {sizes(identical[2])} at 2 threads. "
        "So dropping finished rows leaves every sample as it is at one thread, down to the sizes listed (the "
        "miniature's jobs run at one).",
        "",
    ]
    return lines


def _job_overhead(results: Path) -> list[str]:
    """The train job's time outside its steps, from the last `make run` (its benchmark and log)."""
    bench = results / f"benchmarks/train/{TRAIN_SERIES}.tsv"
    log = results / f"logs/train/{TRAIN_SERIES}.log"
    if not (bench.exists() and log.exists()):
        return ["The job-level overhead needs a finished `make run` (results/benchmarks, results/logs).", ""]
    job_seconds = float(bench.read_text().splitlines()[-1].split("\t")[0])
    text = log.read_text()
    stamps = re.findall(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})", text, re.M)
    done = re.findall(r"train: (\d+)/\d+ \(100%\).* elapsed (\d+):(\d\d) done", text)
    first_step = re.search(r"^(\S+ \S+) INFO chartrl\.train\.trainer: \S+ train: 1/", text, re.M)
    if not (stamps and done and first_step):
        return ["The train log has no step records to split the job's time by.", ""]

    def parse(stamp: str) -> float:
        return time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + int(stamp[20:]) / 1000

    loop = int(done[-1][1]) * 60 + int(done[-1][2])
    start = parse(stamps[0])
    before_first = parse(first_step.group(1)) - start
    return [
        f"The last `make run`'s {TRAIN_SERIES} job (results/benchmarks, results/logs): {job_seconds:.1f} s in all, its "
        f"training loop (steps, validations, checkpoints) {loop} s; from the launcher's first log line to the first "
        f"step's record {before_first:.1f} s (the launcher, imports, model load, MLflow run, the first step); "
        f"outside the loop {job_seconds - loop:.1f} s (Snakemake's job start, the launcher, the end of the run).",
        "",
    ]


def _dag(results: Path) -> list[str]:
    """The last `make run`'s critical path (bench/critical_path.py on its Snakemake log)."""
    import critical_path

    logs = sorted((results.parent / ".snakemake/log").glob("*.snakemake.log"))
    parsed = ((log, critical_path.parse(log)) for log in reversed(logs))
    # the last run that reached the report (not a rerun of a few jobs since)
    log, jobs = next(((log, jobs) for log, jobs in parsed if any(j.rule == "report" for j in jobs)), (None, None))
    if log is None:
        return ["The DAG's critical path needs the Snakemake log of a finished `make run` (.snakemake/log).", ""]
    report = critical_path.report(jobs, 2, log)
    return (
        ["### The DAG: critical path and idle cores (`python bench/critical_path.py`)", ""]
        + [line.replace(str(results.parent) + "/", "") for line in report]
        + [""]
    )


def sections(args) -> list[str]:
    import tempfile

    import torch

    from chartrl.threads import use_threads

    results = _results(getattr(args, "results", None))
    config = _config()
    info = {}
    for line in open("/proc/cpuinfo"):
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    cpu = f"{info.get('model name', 'unknown')} (family {info.get('cpu family', '?')} model {info.get('model', '?')})"
    repeats = max(3, args.repeats)
    lines = ["## A training step against the CPU's limit", ""]
    with tempfile.TemporaryDirectory() as workdir:
        trainer, train = _trainer(config, results, Path(workdir))
        use_threads(train.threads)
        threads = torch.get_num_threads()
        step = 3

        def train_step():
            trainer.train_step(step)

        seconds, counted, total = measure(
            train_step, lambda p: _train_patches(trainer, p), [trainer.model, trainer.optimizer], repeats
        )
        peaks = mm_peaks(counted.mm_shapes)
        train_order = [
            "pass-1 sampling",
            "image re-encoding",
            "tool execution",
            "pass-2 sampling",
            "reference log-probs",
            "policy forward",
            "backward",
            "optimizer",
            "other",
        ]
        lines += [
            f"CPU: {cpu}, {threads} thread(s) (the embedded default's train.threads); {repeats} repeats of step "
            f"{step} of {TRAIN_SERIES} from the same state, median; work counted in one more pass. The old policy's "
            "log-probs cost nothing here: they are the sampler's own (one PPO epoch, on-policy).",
            "",
        ]
        lines += _table(f"{TRAIN_SERIES}: one train step", seconds, counted, peaks, total, train_order)

        # validation, amortised: the same greedy passes every val_every steps (and at step 0)
        val_phases = Phases()
        with patched(_train_patches(trainer, val_phases)), val_phases.phase("validation"):
            started = time.perf_counter()
            trainer.validate()
            val_seconds = time.perf_counter() - started
        validations = train.steps // train.val_every + 1
        lines += [
            f"Validation ({len(trainer.val_rows)} questions and the shuffled-image control, greedy): "
            f"{val_seconds:.2f} s each, {validations} in a {train.steps}-step run: "
            f"{val_seconds * validations / train.steps:.3f} s per step amortised.",
            "",
        ]
        lines += _sampling_lines(trainer, results, step)
        lines += _job_overhead(results)
        lines += _dag(results)

        # the warm start: a step of each kind, from the warm-started model (the work per step does not depend on
        # the weights), threads as the warm start's
        from chartrl.data.contract import read_split
        from chartrl.model.policy import load_policy
        from chartrl.warmstart import supervised

        cfg, prompt_config, tools = config.warmstart, config.prompts, config.tools
        use_threads(cfg.threads)
        policy = load_policy(results / "models/base", train=True)
        rows = read_split(results / "data/synthchart/train.parquet")
        text_rows = [row for row in rows if supervised.call_target(row, tools)]
        optimizer = torch.optim.AdamW(policy.model.parameters(), lr=cfg.lr, betas=(0.9, 0.98))
        policy.model.train()
        import random

        for kind, warm_step in WARM_STEPS.items():

            def warm_step_run(warm_step=warm_step):
                rng = random.Random(f"bench:{warm_step}")
                demos = supervised.step_demonstrations(
                    policy, rows, text_rows, rng, warm_step, cfg, prompt_config, tools
                )
                loss = supervised.supervised_loss(policy, demos, cfg.micro_batch_size)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.model.parameters(), cfg.grad_clip)
                optimizer.step()

            w_seconds, w_counted, w_total = measure(
                warm_step_run, lambda p: _warm_patches(optimizer, p), [policy.model, optimizer], repeats
            )
            w_peaks = mm_peaks(w_counted.mm_shapes)
            lines += _table(
                f"warm start: one {kind} step (step {warm_step}, {cfg.batch_size} demonstrations, "
                f"{torch.get_num_threads()} threads)",
                w_seconds,
                w_counted,
                w_peaks,
                w_total,
                ["demonstrations (render, tools, tokens)", "forward", "backward", "optimizer", "other"],
            )
    lines += [
        "s at peak: the phase's counted work at `torch.mm`'s rate for the model's own shapes in this process; "
        "x over the limit: s per step / s at peak. A phase with no counted work (sampling's elementwise steps, "
        "tool edits, image preprocessing) has no limit here: its time is overhead the GFLOP count does not see.",
        "",
    ]
    return lines


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--results", default=None, help="a finished `make run`'s results folder (default: results/)")
    print("\n".join(sections(parser.parse_args())))
