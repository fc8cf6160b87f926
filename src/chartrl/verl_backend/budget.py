"""A verl plan's budget before booking: for every GPU job of the workflow, its peak memory per GPU, its GPU-hours,
the disk its checkpoints take and the judge calls it makes, from the config and the model's sizes alone.

The jobs are the ones the DAG runs on GPUs: a train job per train series, a generation job per checkpoint an eval
series generates on (``chartrl.evaluate.matrix.checkpoint_groups``: e8 and e9 share e6's step-80 generations), an
answers job per dataset with a shortcut filter. Memory is ``chartrl.verl_backend.memory``; a job that does not
fit is refused when the config loads (:func:`config_memory_problems`), so ``chartrl config check``, ``chartrl
plan`` and Snakemake refuse it alike. Time, disk and judge calls are estimates to book by, printed by ``chartrl
plan`` (the formulas are ``chartrl.verl_backend.gpu_hours``, :func:`checkpoint_bytes`, :func:`train_judge_calls`).
"""

from __future__ import annotations

from dataclasses import dataclass

from chartrl.config import Config, EvalSeries, TrainSeries, config_check
from chartrl.evaluate.matrix import checkpoint_groups, matrix_scorers
from chartrl.rewards import accuracy_signal
from chartrl.verl_backend import gpu_hours
from chartrl.verl_backend.architectures import Architecture, model_architecture
from chartrl.verl_backend.gpu_hours import ESTIMATES, RATES, Hours, TrainingShape, measured_hours
from chartrl.verl_backend.memory import JobShape, Phase, job_phases, memory_problems
from chartrl.verl_backend.overrides import FLASH_ATTENTION, response_length, train_series

CHECKPOINT_BYTES_PER_PARAMETER = 4
CHECKPOINT_BYTES_PER_TRAINABLE = 8
"""verl saves ``model``, ``optimizer`` and ``extra`` (``checkpoint.save_contents`` in the installed
``ppo_trainer.yaml``): the fp32 weights (4 bytes a parameter) and AdamW's two fp32 moments (8 bytes a trainable
parameter); ``extra`` (scheduler, RNG) is small."""

MERGED_BYTES_PER_PARAMETER = 2
"""verl's model merger writes the evaluated checkpoint as a bf16 Hugging Face folder (``base_model_merger.py``)."""

KNOWN_SPLIT_ROWS = {("chartqa_original", "test"): 2500, ("chartqa_hf", "test"): 2500}
"""Published split sizes, for the judge calls of a test split that is not built yet: ChartQA's test split has
1,250 human-written and 1,250 augmented questions (Masry et al. 2022, Table 2)."""

FUSED_KERNELS_OVERRIDE = "actor_rollout_ref.model.use_fused_kernels"


@dataclass(frozen=True)
class Assumptions:
    """A run's measured figures, which replace the estimated time (``chartrl plan --tokens-per-gpu-second
    --fill``, printed by a verl train job: :func:`chartrl.verl_backend.metrics.measured_figures`); None: estimate it
    from the tokens the config implies (``chartrl.verl_backend.gpu_hours``)."""

    tokens_per_gpu_second: float | None = None
    """verl's ``perf/throughput``: prompt and response tokens per GPU-second over whole steps."""
    fill: float | None = None
    """A sequence's mean length over its longest (``prompt_length/mean + response_length/mean`` over
    ``verl.max_prompt_length`` + the response budget); None with a throughput: the config's central estimate."""

    @property
    def measured(self) -> bool:
        return self.tokens_per_gpu_second is not None


@dataclass(frozen=True)
class JobBudget:
    """One GPU job of the plan."""

    job: str
    gpus: int
    shape: JobShape | None
    """None when the model's sizes are unknown (``architectures.unknown_architecture_note`` says why)."""
    gpu_hours: Hours | None
    """The central estimate and the range; None when the number of sequences is unknown (a test split not built
    and not of a known size)."""
    disk_bytes: float
    """What the job leaves on disk: its kept checkpoints, or the merged model it evaluates."""
    disk_peak_bytes: float
    """The most it holds at once: one checkpoint more than it keeps, while the next is written (verl deletes the
    oldest of its own saves before a save only from ``keep_last`` 2 on, and ``chartrl verl train`` deletes an
    earlier attempt's once a newer save is complete: :func:`peak_checkpoints`)."""
    judge_calls: int | None

    @property
    def phases(self) -> list[Phase]:
        return [] if self.shape is None else job_phases(self.shape)


# -- time, disk and judge calls: one formula each --------------------------------------------------------------------


def validations(steps: int, val_every: int, before_train: bool) -> int:
    """verl validates when ``step % test_freq == 0``, at the last step, and before training when asked."""
    return steps // val_every + (1 if steps % val_every else 0) + (1 if before_train else 0)


def saved_steps(steps: int, every: int) -> list[int]:
    """The steps verl saves a checkpoint at: every ``save_freq`` steps and the last."""
    return sorted(set(range(every, steps + 1, every)) | {steps})


def sequence_hours(
    config: Config,
    architecture: Architecture,
    series: TrainSeries | None,
    *,
    rollouts: int,
    answers: int,
    longest: int,
    assumptions: Assumptions,
    training: TrainingShape | None = None,
) -> Hours:
    """GPU-hours of ``rollouts`` trained on (``training``: the train job's shape) and ``answers`` only generated
    (validation, test or filter answers), all of ``series``; from the run's measured figures when given."""
    if assumptions.measured:
        fill = assumptions.fill
        if fill is None:
            fill = gpu_hours.trajectory(config, architecture, series, "central").tokens / longest
        return measured_hours(rollouts + answers, longest, fill, assumptions.tokens_per_gpu_second)
    paths = {estimate: gpu_hours.trajectory(config, architecture, series, estimate) for estimate in ESTIMATES}
    # on the padded path a micro-batch is computed at its longest sequence: the next estimate's, at most the budget
    padded = {"low": paths["central"].tokens, "central": paths["high"].tokens, "high": longest}
    hours = {}
    for estimate, path in paths.items():
        rates = RATES[estimate]
        seconds = (rollouts + answers) * gpu_hours.rollout_seconds(path, rates)
        if training is not None:
            shape = training if training.padded_tokens is None else _padded(training, padded[estimate])
            seconds += rollouts * gpu_hours.training_seconds(path, shape, rates)
        hours[estimate] = seconds / 3600
    return Hours(hours["central"], hours["low"], hours["high"])


def _padded(shape: TrainingShape, tokens: int) -> TrainingShape:
    return TrainingShape(shape.parameters, shape.reference, shape.ppo_epochs, shape.checkpointing, tokens)


def checkpoint_bytes(architecture: Architecture, lora_parameters: int) -> float:
    """One verl checkpoint: ``4 (P + adapters) + 8 T`` bytes (:data:`CHECKPOINT_BYTES_PER_TRAINABLE`)."""
    trainable = lora_parameters or architecture.parameters
    weights = CHECKPOINT_BYTES_PER_PARAMETER * (architecture.parameters + lora_parameters)
    return weights + CHECKPOINT_BYTES_PER_TRAINABLE * trainable


def kept_checkpoints(steps: int, every: int, keep_last: int, named: tuple[int, ...]) -> int:
    """Checkpoints left at the end of a run, resumed or not: the newest ``keep_last`` and the steps an eval series
    names, which chartrl hard-links aside before verl prunes them. A resumed run keeps no more: verl prunes what
    its own process saved, and ``chartrl verl train`` what an earlier attempt saved, once ``keep_last`` newer
    complete checkpoints replace it (``chartrl.verl_backend.checkpoints.CheckpointKeeper``)."""
    saved = saved_steps(steps, every)
    newest = set(saved[-keep_last:])
    return len(newest | {s for s in named if s in saved})


def peak_checkpoints(kept: int) -> int:
    """Checkpoints on disk at once: the kept ones and the one being written (with ``keep_last`` 1 verl deletes the
    old one after the save; after a resume the earlier attempt's oldest goes once the new save is complete)."""
    return kept + 1


def judge_members(signal: str, config: Config) -> int:
    """Judge calls per graded answer: 1 for the judge, one per member for the panel, none for a rule."""
    if signal == "judge":
        return 1
    if signal == "panel":
        return len(config.judge.panel.members)
    return 0


def train_judge_calls(members: int, steps: int, prompts: int, n: int, validation_count: int, val_rows: int) -> int:
    """Every rollout of every step is graded, and every validation answer: ``members x (steps x prompts x n +
    validations x val_rows)``."""
    return members * (steps * prompts * n + validation_count * val_rows)


# -- the jobs ------------------------------------------------------------------------------------------------------


def logits_path(config: Config) -> str:
    """How verl computes log-probabilities: fused kernels when an extra override turns them on, remove-padding with
    flash-attn, the padded path otherwise (``chartrl.verl_backend.overrides.attention_overrides``)."""
    for item in config.verl.extra_overrides:
        key, _, value = item.lstrip("+~").partition("=")
        if key == FUSED_KERNELS_OVERRIDE and value.strip().lower() == "true":
            return "fused"
    return "remove_padding" if config.verl.attn_implementation == FLASH_ATTENTION else "padded"


def image_tokens(config: Config, architecture: Architecture, tools: bool) -> int:
    """Image tokens one sequence can hold: the prompt's chart and, per tool turn, an edited chart of its size, each
    at most ``model.max_pixels`` over the pixels of a token and within the prompt budget."""
    per_image = min(config.model.max_pixels // architecture.image_token_pixels, config.verl.max_prompt_length)
    return per_image * (1 + (config.tools.max_tool_turns if tools else 0))


def job_shape(
    config: Config, architecture: Architecture, *, longest: int, tools: bool, trains: bool, reference: bool
) -> JobShape:
    """A job's memory inputs from its config (``config`` as the job's train series runs it)."""
    verl, lora = config.verl, config.train.lora
    return JobShape(
        architecture=architecture,
        gpus=verl.n_gpus,
        device_gib=verl.gpu_memory_gb,
        trains=trains,
        lora_parameters=architecture.lora_parameters(lora.r) if lora.enabled else 0,
        reference=reference and not lora.enabled,
        param_offload=verl.param_offload,
        optimizer_offload=verl.optimizer_offload,
        vllm_share=verl.gpu_memory_utilization,
        longest=longest,
        image_tokens=image_tokens(config, architecture, tools),
        log_prob_micro=verl.log_prob_micro_batch_size_per_gpu,
        update_micro=verl.ppo_micro_batch_size_per_gpu,
        update_sequences_per_gpu=max(1, verl.ppo_mini_batch_size * config.rollout.n // verl.n_gpus),
        logits_path=logits_path(config),
        temperature_copy=config.rollout.temperature != 1.0,
        checkpointing=verl.gradient_checkpointing,
    )


def train_budget(config: Config, series: TrainSeries, assumptions: Assumptions) -> JobBudget:
    own = config.for_train_series(series.id)  # the series' own train keys (a LoRA variant)
    train, architecture = own.train, model_architecture(own.model)
    longest = own.verl.max_prompt_length + response_length(series, own)
    rollouts = train.steps * train.prompts_per_step * own.rollout.n
    validation_count = validations(train.steps, train.val_every, own.verl.val_before_train)
    val_sequences = validation_count * train.val_rows
    members = judge_members(accuracy_signal(series.reward.name, series.reward.params), own)
    calls = train_judge_calls(
        members, train.steps, train.prompts_per_step, own.rollout.n, validation_count, train.val_rows
    )
    if architecture is None:
        return JobBudget(f"train {series.id}", own.verl.n_gpus, None, None, 0.0, 0.0, calls)
    shape = job_shape(own, architecture, longest=longest, tools=series.tools, trains=True, reference=train.kl_coef > 0)
    training = TrainingShape(
        parameters=architecture.parameters + shape.lora_parameters,
        reference=shape.reference,
        ppo_epochs=train.ppo_epochs,
        checkpointing=own.verl.gradient_checkpointing,
        padded_tokens=longest if shape.logits_path == "padded" else None,
    )
    hours = sequence_hours(
        own,
        architecture,
        series,
        rollouts=rollouts,
        answers=val_sequences,
        longest=longest,
        assumptions=assumptions,
        training=training,
    )
    one = checkpoint_bytes(architecture, shape.lora_parameters)
    kept = kept_checkpoints(train.steps, train.checkpoint_every, train.keep_last, config.keep_steps(series.id))
    return JobBudget(f"train {series.id}", shape.gpus, shape, hours, one * kept, one * peak_checkpoints(kept), calls)


def evaluation_rows(config: Config, series: EvalSeries) -> int | None:
    """Questions an eval series generates on: ``evaluate.limit``, else the dataset's subsample of the split, else
    a published size (:data:`KNOWN_SPLIT_ROWS`); None when none is known before the data stage."""
    if config.evaluate.limit is not None:
        return config.evaluate.limit
    dataset = config.datasets[series.dataset]
    subsample = (dataset.options.get("subsample") or {}).get(series.split)
    if subsample:
        return int(subsample["size"])
    return KNOWN_SPLIT_ROWS.get((dataset.source, series.split))


def generation_budget(config: Config, members: list[EvalSeries], assumptions: Assumptions) -> JobBudget:
    """The generation job of one evaluated checkpoint, whose answers every matrix scorer grades."""
    first = members[0]
    trained = train_series(config, first.of)
    own = config.for_train_series(first.of)
    architecture = model_architecture(own.model)
    rows = evaluation_rows(config, first)
    samples = None if rows is None else rows * config.evaluate.n
    per_answer = sum(judge_members(scorer, config) for scorer in matrix_scorers(config))
    calls = 0 if per_answer == 0 else (None if samples is None else samples * per_answer)
    name = f"generate {first.id} ({first.of} @ {first.checkpoint})"
    if architecture is None:
        return JobBudget(name, own.verl.n_gpus, None, None, 0.0, 0.0, calls)
    longest = own.verl.max_prompt_length + response_length(trained, own)
    shape = job_shape(
        own, architecture, longest=longest, tools=trained.tools, trains=False, reference=own.train.kl_coef > 0
    )
    hours = None
    if samples is not None:
        hours = sequence_hours(
            own, architecture, trained, rollouts=0, answers=samples, longest=longest, assumptions=assumptions
        )
    merged = 0.0 if first.checkpoint == "start" else MERGED_BYTES_PER_PARAMETER * architecture.parameters
    return JobBudget(name, shape.gpus, shape, hours, merged, merged, calls)


def filter_budget(config: Config, dataset: str, assumptions: Assumptions) -> JobBudget:
    """The shortcut filter's answers job: ``max_questions x controls x k`` no-tool answers, one pass each."""
    settings = config.datasets[dataset].shortcut_filter
    architecture = model_architecture(config.model)
    questions = settings.max_questions
    sequences = None if questions is None else questions * len(settings.controls) * settings.k
    name = f"shortcut answers {dataset}"
    if architecture is None:
        return JobBudget(name, config.verl.n_gpus, None, None, 0.0, 0.0, 0)
    longest = config.verl.max_prompt_length + config.rollout.max_new_tokens
    shape = job_shape(config, architecture, longest=longest, tools=False, trains=False, reference=False)
    hours = None
    if sequences is not None:
        hours = sequence_hours(
            config, architecture, None, rollouts=0, answers=sequences, longest=longest, assumptions=assumptions
        )
    return JobBudget(name, shape.gpus, shape, hours, 0.0, 0.0, 0)


def plan_budget(config: Config, assumptions: Assumptions = Assumptions()) -> list[JobBudget]:
    """Every GPU job of a verl config, in the order the DAG runs them (filter, train, generate)."""
    jobs = [filter_budget(config, name, assumptions) for name in config.filtered_datasets]
    jobs += [train_budget(config, series, assumptions) for series in config.train_series]
    jobs += [generation_budget(config, members, assumptions) for members in checkpoint_groups(config).values()]
    return jobs


# -- the refusal -----------------------------------------------------------------------------------------------------


@config_check("verl memory")
def config_memory_problems(config: Config) -> list[str]:
    """Every job whose estimated peak per GPU exceeds ``verl.gpu_memory_gb``, jobs with the same problem on one
    line (a verl config only; a model of unknown size is not judged: ``chartrl plan`` says so)."""
    if config.backend != "verl":
        return []
    grouped: dict[str, list[str]] = {}
    for job in plan_budget(config):
        if job.shape is not None:
            for problem in memory_problems(job.shape):
                grouped.setdefault(problem, []).append(job.job)
    return [f"{', '.join(jobs)}: {problem}" for problem, jobs in grouped.items()]
