# The data stage's helpers (rules/data.smk): the dataset a split reads, its spec, its source files, the targets.
from chartrl.data.sources import source_of, split_spec

DATA_CODE = package_sources("data", "config", "files.py", "progress.py", "tracking.py")


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
