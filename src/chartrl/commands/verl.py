"""``chartrl verl ...``: the verl backend (GPU clusters).

- ``chartrl verl overrides --series ID [--configfile F]``: the Hydra overrides of one series' verl job, one per
  line (a train series: its training; an eval series: its generation job on the test split).
- ``chartrl verl train --spec JSON --train P --val P --out DIR -- OVERRIDES...``: what the train rule runs.
- ``chartrl verl generate --spec JSON --run run.json --data P --out P --gallery P -- OVERRIDES...``: what the
  generate rule runs for an eval series (merge, convert, ``trainer.val_only``, convert the dump back).
- ``chartrl verl shortcut-answers --spec JSON --data P --out P -- OVERRIDES...``: what the shortcut_answers rule
  runs (the shortcut filter's answers without a usable chart, ``chartrl.verl_backend.shortcut``).
- ``chartrl verl merge --run run.json --checkpoint last|best_val|N --out DIR``: a checkpoint to Hugging Face.
- ``chartrl verl generations --dump DIR --data P --tokenizer DIR --out P``: verl's dump -> generations contract.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

from chartrl.commands.overlays import add_configfile_argument
from chartrl.commands.spec import FILTER_HOLDS, Reads, filter_settings, given_spec, read_job_spec, series_from
from chartrl.config import (
    ConfigError,
    EvalSeries,
    MlflowSettings,
    PromptConfig,
    load_config,
    model_config,
    tools_config,
    train_config,
)
from chartrl.data.contract import read_split
from chartrl.errors import UsageError
from chartrl.installation import refuse_a_stale_install
from chartrl.rewards import accuracy_signal
from chartrl.verl_backend.checkpoints import merge_checkpoint, select_checkpoint
from chartrl.verl_backend.checks import IGNORED_BY_VERL, ignored_train_keys
from chartrl.verl_backend.driver import refuse_an_old_driver
from chartrl.verl_backend.evaluation import VerlGenerationJob, run_generation_job
from chartrl.verl_backend.generations import convert_dump
from chartrl.verl_backend.job import ENTRY_VARIABLE, VerlTrainJob, override_values, run_train_job
from chartrl.verl_backend.overrides import eval_overrides, resolve_placeholders, train_overrides
from chartrl.verl_backend.shortcut import ShortcutAnswersJob, run_shortcut_answers_job
from chartrl.verl_backend.snapshot import missing_snapshot_problem

log = logging.getLogger(__name__)
VERL_SECTIONS = ("prompts", "tools", "model", "rollout", "verl")
READS = {
    # judge: given only when the series' reward judges, as for `chartrl train`
    "verl train": Reads(
        "verl train",
        sections=("train", "judge", *VERL_SECTIONS),
        entries=("series",),
        with_ids=("series",),
        holds="the series (with its id), as the train rule writes it",
    ),
    # n, greedy and limit of evaluate reach verl in the job's overrides
    "verl generate": Reads(
        "verl generate",
        sections=VERL_SECTIONS,
        keys={"evaluate": ("gallery_size",)},
        entries=("series", "of"),
        with_ids=("series", "of"),
        holds="the eval series and its train series (`of`), as the generate rule writes",
    ),
    "verl shortcut-answers": Reads(
        "verl shortcut-answers", sections=VERL_SECTIONS, entries=("filter",), with_ids=("filter",), holds=FILTER_HOLDS
    ),
}


def before_verl_starts() -> None:
    """What a verl job checks on the node it runs on, in the environment it runs (a Ray job's may be another than
    its launcher's: ray.python): a driver its CUDA wheels run on (unless a test stand-in replaces verl, which needs
    no GPU: chartrl.verl_backend.job.ENTRY_VARIABLE), and the checkout's code."""
    if not os.environ.get(ENTRY_VARIABLE):
        refuse_an_old_driver()
    refuse_a_stale_install()


def job_overrides(values: list[str]) -> list[str]:
    """The verl overrides after ``--``, with this job's working directory and chartrl's folder in place of the
    rule's ``WORKDIR`` and ``CHARTRL_PACKAGE`` (chartrl.verl_backend.overrides: no path of the checkout is in a
    job's params); verl's Ray actors need the paths absolute."""
    overrides = [o for o in values if o != "--"]
    if not overrides:
        raise UsageError("give the verl overrides after `--` (chartrl verl overrides --series ID prints them)")
    return resolve_placeholders(overrides, Path.cwd())


def cmd_overrides(args: argparse.Namespace) -> int:
    config = load_config(args.configfile, root=args.root)
    if args.series not in config.series:
        raise ConfigError(f"unknown series '{args.series}'; series are: {', '.join(config.series)}")
    if isinstance(config.series[args.series], EvalSeries):
        lines = eval_overrides(config, args.series, Path(args.workdir).resolve())
    else:
        lines = train_overrides(config, args.series, Path(args.workdir).resolve())
    print("\n".join(lines))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    before_verl_starts()

    spec = read_job_spec(args.spec, READS["verl train"])
    overrides = job_overrides(args.overrides)
    train = train_config(spec["train"])
    series = series_from(spec["series"], train.dataset)
    judged = accuracy_signal(series.reward.name, series.reward.params) in ("judge", "panel")
    job = VerlTrainJob(
        series=series,
        train=train,
        prompts=PromptConfig(**spec["prompts"]),
        tools=tools_config(spec["tools"]),
        model=model_config(spec["model"]),
        spec=given_spec(args.spec, {name: value for name, value in spec.items() if name != "judge" or judged}),
        overrides=overrides,
        run_dir=Path(args.out),
        train_split=Path(args.train),
        val_split=Path(args.val),
        mlflow=MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment),
        keep_steps=tuple(spec.get("keep_steps", ())),
    )
    require_model_snapshot(job.model)
    warn_ignored_train_keys(job.series.id, train)
    summary = run_train_job(job)
    log.info("%s trained on verl: last step %d", job.series.id, summary["last_step"])
    return 0


def require_model_snapshot(model) -> None:
    """A job pinned to ``model.revision`` starts only once that commit is downloaded (``verl_backend.snapshot``)."""
    problem = missing_snapshot_problem(model)
    if problem:
        raise UsageError(problem)


def warn_ignored_train_keys(series_id: str, train) -> None:
    """Log each train key this series sets that verl 0.9.1 does not apply (``checks.IGNORED_BY_VERL``)."""
    for key in ignored_train_keys(train):
        log.warning("not applied on verl: " + IGNORED_BY_VERL[key].format(series=series_id))


def cmd_generate(args: argparse.Namespace) -> int:
    before_verl_starts()

    spec = read_job_spec(args.spec, READS["verl generate"])
    overrides = job_overrides(args.overrides)
    length = override_values(overrides).get("actor_rollout_ref.rollout.response_length")
    job = VerlGenerationJob(
        series=spec["series"],
        of=spec["of"],
        prompts=PromptConfig(**spec["prompts"]),
        tools=tools_config(spec["tools"]),
        model=model_config(spec["model"]),
        overrides=overrides,
        run_json=Path(args.run),
        data=Path(args.data),
        out=Path(args.out),
        gallery=Path(args.gallery),
        gallery_size=spec["evaluate"]["gallery_size"],
        response_length=int(length) if length else None,
        mlflow=MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment),
    )
    if str(job.series.get("checkpoint")) == "start":  # the starting model itself; a checkpoint is merged from it
        require_model_snapshot(job.model)
    run_generation_job(job)
    return 0


def cmd_shortcut_answers(args: argparse.Namespace) -> int:
    before_verl_starts()

    spec = read_job_spec(args.spec, READS["verl shortcut-answers"])
    settings = filter_settings(spec)
    overrides = job_overrides(args.overrides)
    job = ShortcutAnswersJob(
        dataset=spec["filter"]["id"],
        settings=settings,
        prompts=PromptConfig(**spec["prompts"]),
        tools=tools_config(spec["tools"]),
        model=model_config(spec["model"]),
        overrides=overrides,
        data=Path(args.data),
        out=Path(args.out),
    )
    require_model_snapshot(job.model)
    run_shortcut_answers_job(job)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    run = json.loads(Path(args.run).read_text())
    if run.get("backend") != "verl":
        raise UsageError(f"{args.run} is a {run.get('backend')} run; only verl checkpoints need merging")
    root = Path(next(iter(run["checkpoints"]["steps"].values()))).parents[1]
    history = {int(k): v for k, v in run.get("val_history", {}).items()}
    which = args.checkpoint if args.checkpoint in ("last", "best_val") else int(args.checkpoint)
    print(merge_checkpoint(select_checkpoint(root, which, history), args.out))
    return 0


def cmd_generations(args: argparse.Namespace) -> int:
    records = convert_dump(
        args.dump,
        read_split(args.data),
        args.out,
        tools=args.tools,
        max_calls=args.max_calls,
        tokenizer_path=args.tokenizer,
        image_dir=args.images or Path(args.out).with_suffix("") / "images",
        model=args.model or str(args.tokenizer),
        response_length=args.response_length,
        samples_per_question=args.samples_per_question,
    )
    print(f"{len(records)} generations written to {args.out}")
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    verl = stages.add_parser("verl", help="the verl backend: overrides, training, checkpoints, generations")
    commands = verl.add_subparsers(dest="command", required=True)

    overrides = commands.add_parser("overrides", help="print one series' verl overrides, one per line")
    overrides.add_argument("--series", required=True)
    add_configfile_argument(overrides)
    overrides.add_argument("--root", default=".", help="repository root holding config/ (default: .)")
    overrides.add_argument("--workdir", default=".", help="the workflow's working directory (results/ lives there)")
    overrides.set_defaults(func=cmd_overrides)

    train = commands.add_parser("train", help="train one series with verl (what the train rule runs)")
    train.add_argument("--spec", required=True, help="JSON: the series (with id) and the sections it reads")
    train.add_argument("--train", required=True, help="train split parquet (our contract)")
    train.add_argument("--val", required=True, help="val split parquet (our contract)")
    train.add_argument("--out", required=True, help="results/runs/{series}")
    train.add_argument("--tracking-uri", default="sqlite:///results/mlflow.db")
    train.add_argument("--experiment", default="chartrl")
    train.add_argument("overrides", nargs=argparse.REMAINDER, help="-- then the Hydra overrides")
    train.set_defaults(func=cmd_train)

    generate = commands.add_parser("generate", help="one eval series' test generations on verl (the generate rule)")
    generate.add_argument("--spec", required=True, help="JSON: the eval series, its train series (of), the sections")
    generate.add_argument("--run", required=True, help="results/runs/{of}/run.json of a verl run")
    generate.add_argument("--data", required=True, help="the test split (our contract)")
    generate.add_argument("--out", required=True, help="results/eval/{series}/generations.parquet")
    generate.add_argument("--gallery", required=True, help="gallery PNG")
    generate.add_argument("--tracking-uri", default="sqlite:///results/mlflow.db")
    generate.add_argument("--experiment", default="chartrl")
    generate.add_argument("overrides", nargs=argparse.REMAINDER, help="-- then the Hydra overrides")
    generate.set_defaults(func=cmd_generate)

    shortcut = commands.add_parser(
        "shortcut-answers", help="the starting policy's answers without a usable chart on verl (shortcut filter)"
    )
    shortcut.add_argument("--spec", required=True, help="JSON: filter (dataset id and settings) and the sections")
    shortcut.add_argument("--data", required=True, help="the train split (our contract)")
    shortcut.add_argument("--out", required=True, help="results/filter/{dataset}/answers.parquet")
    shortcut.add_argument("overrides", nargs=argparse.REMAINDER, help="-- then the Hydra overrides")
    shortcut.set_defaults(func=cmd_shortcut_answers)

    merge = commands.add_parser("merge", help="merge a verl checkpoint into a Hugging Face folder")
    merge.add_argument("--run", required=True, help="results/runs/{series}/run.json of a verl run")
    merge.add_argument("--checkpoint", default="last", help="last, best_val or a step number")
    merge.add_argument("--out", required=True)
    merge.set_defaults(func=cmd_merge)

    generations = commands.add_parser("generations", help="verl's generation dump -> the generations contract")
    generations.add_argument("--dump", required=True, help="the job's trainer.validation_data_dir")
    generations.add_argument("--data", required=True, help="the split it generated on (our contract)")
    generations.add_argument("--tokenizer", required=True, help="the policy folder (merged checkpoint)")
    generations.add_argument("--tools", nargs="*", default=[], help="tools offered (none for a no-tool series)")
    generations.add_argument("--max-calls", type=int, default=1)
    generations.add_argument("--response-length", type=int, default=None)
    generations.add_argument(
        "--samples-per-question",
        type=int,
        default=None,
        help="fail unless every question of --data has this many samples in the dump (default: log a shortfall)",
    )
    generations.add_argument("--images", default=None, help="folder for edited charts")
    generations.add_argument("--model", default=None, help="the model name written in each record")
    generations.add_argument("--out", required=True)
    generations.set_defaults(func=cmd_generations)
