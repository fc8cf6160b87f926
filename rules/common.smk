# Helpers shared by the rules: the typed config, target lists, the params each job depends on.
import json
import shlex
from pathlib import Path

from chartrl.config import ConfigError, parse_config, to_plain
from chartrl.data.sources import source_of, split_spec
from chartrl.tools.study_checks import tool_data_problems

REPO_ROOT = Path(workflow.basedir)
PACKAGE_DIR = REPO_ROOT / "src" / "chartrl"

# The same checks as `chartrl config check`: an eval series' `of`, dataset references, ... (after the schema),
# and that the tools of the tool series have label boxes to edit.
CFG = parse_config(config)
_STUDY_PROBLEMS = tool_data_problems(CFG)
if _STUDY_PROBLEMS:
    raise ConfigError("the study cannot work as configured:\n  " + "\n  ".join(_STUDY_PROBLEMS))


wildcard_constraints:
    dataset="[A-Za-z][A-Za-z0-9_]*",
    split="train|val|test",
    series="|".join(s.id for s in CFG.series.values()),


def package_sources(*parts):
    """Source files of chartrl a rule's output depends on. Snakemake does not see code imported by a shell
    command, so rules declare these as inputs and a change to them reruns the rule (mtime trigger)."""
    files = []
    for part in parts:
        path = PACKAGE_DIR / part
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return [str(f) for f in files]


DATA_CODE = package_sources("data", "config", "files.py", "progress.py", "tracking.py")
MODEL_CODE = package_sources("model", "rollout", "tools", "prompts", "config", "files.py", "tracking.py")
TRAIN_CODE = MODEL_CODE + package_sources("train", "rewards", "judge", "launch.py")
if CFG.backend == "verl":
    TRAIN_CODE += package_sources("verl_backend")
TRAIN_SERIES = [s.id for s in CFG.train_series]
TRAIN_DATASET = CFG.resolved["train"]["dataset"]


def config_slice(*sections):
    """The resolved config sections a job depends on, as JSON (its params: a change elsewhere does not rerun it)."""
    return json.dumps({name: to_plain(CFG.resolved[name]) for name in sections}, sort_keys=True)


def dataset_config(name):
    if name not in CFG.datasets:
        raise ValueError(f"dataset '{name}' is not defined in the config; defined: {', '.join(CFG.datasets)}")
    return CFG.datasets[name]


def dataset_splits(name):
    """The splits built for a dataset: what the series read (or all of them for a dataset nobody reads)."""
    return CFG.needed_splits().get(name, dataset_config(name).splits)


def data_split_spec(wildcards):
    """The resolved config one split depends on, as JSON: a change elsewhere does not rerun this split."""
    return json.dumps(split_spec(dataset_config(wildcards.dataset), wildcards.split, REPO_ROOT), sort_keys=True)


def data_box_floor(wildcards):
    """`--min-box-coverage X` for the train split of a dataset a tool series trains on (the data stage fails below
    data.min_box_coverage), else nothing."""
    if wildcards.split == "train" and wildcards.dataset in CFG.tool_train_datasets():
        return f"--min-box-coverage {CFG.min_box_coverage:g}"
    return ""


def data_card_spec(wildcards):
    return json.dumps(dataset_config(wildcards.dataset).to_dict(), sort_keys=True)


def data_source_files(wildcards):
    """The local files a split reads, those that exist: a change to one reruns the split. A missing one is not an
    input (Snakemake would refuse the whole plan, even a dry run on a machine that is not the cluster); the split's
    job then fails naming the file and what to download."""
    dataset = dataset_config(wildcards.dataset)
    return [str(p) for p in source_of(dataset).input_files(dataset, wildcards.split, REPO_ROOT) if p.exists()]


def data_split_outputs(wildcards, kind):
    suffix = {"parquet": "parquet", "rejects": "rejects.json"}[kind]
    return [f"results/data/{wildcards.dataset}/{split}.{suffix}" for split in dataset_splits(wildcards.dataset)]


def data_targets():
    targets = []
    for name, splits in CFG.needed_splits().items():
        targets += [f"results/data/{name}/{split}.parquet" for split in splits]
        targets.append(f"results/data/{name}/card.json")
    return targets


def model_targets():
    """The embedded default builds and warm-starts its own model; a config with model.path uses that model."""
    if CFG.model.path is not None:
        return []
    return ["results/models/base", "results/models/warmstart_gallery.png"]


def policy_model(wildcards):
    """The model every train series starts from: the warm-started tiny model, or model.path."""
    return "results/models/base" if CFG.model.path is None else []


def series_split(series, split):
    return f"results/data/{CFG.series[series].dataset}/{split}.parquet"


def train_job_spec(wildcards):
    """What one train job depends on: its series (with its id) and the sections training reads (the verl backend
    also reads model: and verl:)."""
    series = {"id": wildcards.series, **to_plain(CFG.resolved["series"][wildcards.series])}
    names = ("train", "rollout", "prompts", "tools", "judge") + (("model", "verl") if CFG.backend == "verl" else ())
    sections = {name: to_plain(CFG.resolved[name]) for name in names}
    keep = CFG.keep_steps(wildcards.series)  # checkpoint steps eval series name: saved and never pruned
    return json.dumps({"series": series, **sections, **({"keep_steps": list(keep)} if keep else {})}, sort_keys=True)


def train_targets():
    return [f"results/runs/{series}/run.json" for series in TRAIN_SERIES]


def verl_train_overrides(wildcards):
    """The series' verl overrides (chartrl.verl_backend.overrides), shell-quoted, for the verl train command."""
    from chartrl.verl_backend.overrides import train_overrides

    return shlex.join(train_overrides(CFG, wildcards.series, os.getcwd()))


# What a verl train or generate job occupies: the whole cluster shape verl is given (verl.nnodes x
# verl.n_gpus_per_node). Declared as the rule's `gpu` resource so that Snakemake, limited by `--resources gpu=N`,
# queues verl jobs instead of starting them together: verl checks its resource pool once at start and fails when
# another job's workers hold the GPUs. The Ray driver itself reserves none (train_launch).
VERL_JOB_GPUS = CFG.verl.n_gpus


def train_launch(wildcards):
    """The launcher prefix of a train job (rules/launch.smk). A verl job's driver reserves one CPU: verl's own
    workers reserve the GPUs inside the cluster; a local job reserves its threads and ray.job_gpus."""
    if CFG.backend == "verl":
        config_text = train_job_spec(wildcards) + verl_train_overrides(wildcards)
        return launch_command("train", wildcards.series, config_text, num_cpus=1, num_gpus=0)
    return launch_command("train", wildcards.series, train_job_spec(wildcards), CFG.train.threads, CFG.ray.job_gpus)


# --- evaluation: generations once per (train series, checkpoint, data), scored by every series that asks --------
EVAL_CODE = TRAIN_CODE + package_sources("evaluate")  # (with verl_backend/ for the verl backend)


def _generation_key(series):
    return (series.of, str(series.checkpoint), series.dataset, series.split)


GENERATION_OWNER = {}  # key -> the first eval series (config order) with it: the one whose rule generates
for _series in CFG.eval_series:
    GENERATION_OWNER.setdefault(_generation_key(_series), _series.id)
GENERATING_SERIES = sorted(set(GENERATION_OWNER.values()))


def generations_of(series_id):
    """The generations file an eval series scores: shared by every series naming the same checkpoint and data."""
    return f"results/eval/{GENERATION_OWNER[_generation_key(CFG.series[series_id])]}/generations.parquet"


def scores_path(series_id, scorer):
    return f"results/eval/{series_id}/scores_{scorer}.json"


def _diagonals():
    """series -> (first scores, second scores): the checkpoint's first (series, scorer) against each later one with
    another scorer; the file goes under the series that completes the pair (e9 for e8/e9)."""
    pairs, groups = {}, {}
    for series in CFG.eval_series:
        groups.setdefault(_generation_key(series), []).extend((series.id, scorer) for scorer in series.scorers)
    for entries in groups.values():
        reference = entries[0]
        for series_id, scorer in entries[1:]:
            if scorer != reference[1] and series_id not in pairs:
                pairs[series_id] = (scores_path(*reference), scores_path(series_id, scorer))
    return pairs


DIAGONALS = _diagonals()


def eval_train_run(wildcards):
    return f"results/runs/{CFG.series[wildcards.series].of}/run.json"


def eval_data(wildcards):
    series = CFG.series[wildcards.series]
    return f"results/data/{series.dataset}/{series.split}.parquet"


def eval_job_spec(*sections):
    def spec(wildcards):
        series = CFG.series[wildcards.series]
        data = {
            "series": {"id": series.id, **to_plain(CFG.resolved["series"][series.id])},
            "of": {"id": series.of, **to_plain(CFG.resolved["series"][series.of])},
        }
        data.update({name: to_plain(CFG.resolved[name]) for name in sections})
        return json.dumps(data, sort_keys=True)

    return spec


def eval_targets():
    targets = [scores_path(s.id, scorer) for s in CFG.eval_series for scorer in s.scorers]
    return targets + [f"results/eval/{series}/diagonal.json" for series in DIAGONALS]


def verl_generate_overrides(wildcards):
    """An eval series' verl generation job (chartrl.verl_backend.overrides.eval_overrides), shell-quoted."""
    from chartrl.verl_backend.overrides import eval_overrides

    return shlex.join(eval_overrides(CFG, wildcards.series, os.getcwd()))


GENERATE_SECTIONS = ("evaluate", "rollout", "prompts", "tools") + (("model", "verl") if CFG.backend == "verl" else ())
generate_job_spec = eval_job_spec(*GENERATE_SECTIONS)


def generate_launch(wildcards):
    """The launcher prefix of a generate job (as train_launch: verl's driver takes one CPU, its workers the GPUs)."""
    spec = generate_job_spec(wildcards)
    if CFG.backend == "verl":
        return launch_command("generate", wildcards.series, spec + verl_generate_overrides(wildcards), 1, 0)
    return launch_command("generate", wildcards.series, spec, CFG.evaluate.threads, CFG.ray.job_gpus)


def report_inputs(wildcards):
    """Everything the report reads: data cards, the warm-start check, training and evaluation results."""
    inputs = [f"results/data/{name}/card.json" for name in CFG.needed_splits()]
    inputs += ["results/models/base"] if CFG.model.path is None else []
    inputs += [f"results/runs/{series}/metrics.jsonl" for series in TRAIN_SERIES]
    inputs += [f"results/eval/{series}/generations.parquet" for series in GENERATING_SERIES]
    if CFG.backend == "verl":  # per-type test accuracy is read from the generations and the split's question types
        inputs.append(TEST_DATA)
    return inputs + eval_targets()


def all_targets():
    return data_targets() + model_targets() + train_targets() + eval_targets() + ["results/report/index.html"]


# --- per-type test accuracy (rules/evaluate.smk) and more train seeds (rules/seeds.smk), issue 8 ------------
TEST_DATA = f"results/data/{CFG.resolved['evaluate']['dataset']}/{CFG.resolved['evaluate']['split']}.parquet"


def test_accuracy_spec(series_id):
    sections = {name: to_plain(CFG.resolved[name]) for name in ("evaluate", "rollout", "prompts", "tools")}
    series = {"id": series_id, **to_plain(CFG.resolved["series"].get(series_id, {}))}
    return json.dumps({"series": series, **sections}, sort_keys=True)


def test_accuracy_targets():
    if CFG.backend != "local":
        return []
    targets = [f"results/eval/{series}/test_accuracy.json" for series in TRAIN_SERIES]
    if CFG.model.path is None:
        targets += [f"results/eval/warmstart/test_accuracy_tools_{mode}.json" for mode in ("on", "off")]
    return targets


def seed_train_spec(wildcards):
    spec = json.loads(train_job_spec(wildcards))
    spec["train"]["seed"] = int(wildcards.seed)
    return json.dumps(spec, sort_keys=True)


def seed_targets():
    if CFG.backend != "local":
        return []
    return [
        f"results/seeds/{series}/seed{seed}/test_accuracy.json" for series in TRAIN_SERIES for seed in CFG.extra_seeds
    ]
