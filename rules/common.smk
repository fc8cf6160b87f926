# Helpers shared by the rules: the typed config, target lists, the params each job depends on.
import json
from pathlib import Path

from chartrl.config import parse_config
from chartrl.data.sources import source_of, split_spec

REPO_ROOT = Path(workflow.basedir)
PACKAGE_DIR = REPO_ROOT / "src" / "chartrl"

# The same checks as `chartrl config check`: an eval series' `of`, dataset references, ... (after the schema).
CFG = parse_config(config)


wildcard_constraints:
    dataset="[A-Za-z][A-Za-z0-9_]*",
    split="train|val|test",


def package_sources(*parts):
    """Source files of chartrl a rule's output depends on. Snakemake does not see code imported by a shell
    command, so rules declare these as inputs and a change to them reruns the rule (mtime trigger)."""
    files = []
    for part in parts:
        path = PACKAGE_DIR / part
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return [str(f) for f in files]


DATA_CODE = package_sources("data", "config.py", "files.py", "progress.py", "tracking.py")


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


def data_card_spec(wildcards):
    return json.dumps(dataset_config(wildcards.dataset).to_dict(), sort_keys=True)


def data_source_files(wildcards):
    dataset = dataset_config(wildcards.dataset)
    return [str(p) for p in source_of(dataset).input_files(dataset, wildcards.split, REPO_ROOT)]


def data_split_outputs(wildcards, kind):
    suffix = {"parquet": "parquet", "rejects": "rejects.json"}[kind]
    return [f"results/data/{wildcards.dataset}/{split}.{suffix}" for split in dataset_splits(wildcards.dataset)]


def data_targets():
    targets = []
    for name, splits in CFG.needed_splits().items():
        targets += [f"results/data/{name}/{split}.parquet" for split in splits]
        targets.append(f"results/data/{name}/card.json")
    return targets


def all_targets():
    return data_targets()
