# The report's helpers (rules/report.smk).


def report_inputs(wildcards):
    """Everything the report reads: data cards, the warm-start check, training and evaluation results."""
    inputs = [f"results/data/{name}/card.json" for name in CFG.needed_splits()]
    inputs += ["results/models/warmstart_check.json"] if CFG.model.path is None else []
    inputs += tool_path_check_targets()
    inputs += filter_targets()  # the shortcut filter's cards
    inputs += [f"results/runs/{series}/metrics.jsonl" for series in TRAIN_SERIES]
    inputs += [f"results/eval/{series}/generations.parquet" for series in GENERATING_SERIES]
    if VERL:  # per-type test accuracy is read from the generations and the split's question types
        inputs.append(TEST_DATA)
    return inputs + eval_targets()
