# The data stage's helpers (rules/data.smk): the dataset a split reads, its spec and code, its source files, the
# targets.


def dataset_config(name):
    if name not in CFG.datasets:
        raise ValueError(f"dataset '{name}' is not defined in the config; defined: {', '.join(CFG.datasets)}")
    return CFG.datasets[name]


def dataset_splits(name):
    """The splits built for a dataset: what the series read (or all of them for a dataset nobody reads)."""
    return CFG.needed_splits().get(name, dataset_config(name).splits)


# One split depends on its dataset's config narrowed to the split (a change elsewhere does not rerun it) and on
# the code of its dataset's reader; the card on the whole dataset's config.
data_split_spec = job_spec(
    "data build", dataset=lambda wildcards: chartrl.split_job_spec(dataset_config(wildcards.dataset), wildcards.split)
)
data_split_code = job_code("data build", uses=lambda wildcards: chartrl.source_code(dataset_config(wildcards.dataset)))
data_card_spec = job_spec("data card", dataset=lambda wildcards: dataset_config(wildcards.dataset).to_dict())
data_card_code = job_code("data card")
# The folder the config's local paths are read against (the checkout), as the data job's --root names it
DATA_ROOT = chartrl.relative_root(REPO_ROOT)


def data_box_floor(wildcards):
    """`--min-box-coverage X` for the train split of a dataset a tool series trains on (the data stage fails below
    data.min_box_coverage), else nothing."""
    if wildcards.split == "train" and wildcards.dataset in CFG.tool_train_datasets():
        return f"--min-box-coverage {CFG.min_box_coverage:g}"
    return ""


def data_source_files(wildcards):
    """The local files a split reads, those that exist (chartrl.workflow.source_files): a change to one reruns the
    split."""
    return chartrl.source_files(dataset_config(wildcards.dataset), wildcards.split, REPO_ROOT)


def data_split_outputs(wildcards, kind):
    suffix = {"parquet": "parquet", "rejects": "rejects.json"}[kind]
    return [f"results/data/{wildcards.dataset}/{split}.{suffix}" for split in dataset_splits(wildcards.dataset)]


def data_targets():
    targets = []
    for name, splits in CFG.needed_splits().items():
        targets += [f"results/data/{name}/{split}.parquet" for split in splits]
        targets.append(f"results/data/{name}/card.json")
    return targets
