# The report: training curves per reward generation, matched-step and test tables, the diagonal check with its
# disagreements, rollouts, every series' config and the limits of the run; metrics.json holds every number.


def report_inputs(wildcards):
    """Everything the report reads: data cards, the warm-start check, training and evaluation results."""
    inputs = [f"results/data/{name}/card.json" for name in CFG.needed_splits()]
    inputs += ["results/models/base"] if CFG.model.path is None else []
    inputs += [f"results/runs/{series}/metrics.jsonl" for series in TRAIN_SERIES]
    inputs += [f"results/eval/{series}/generations.parquet" for series in GENERATING_SERIES]
    if VERL:  # per-type test accuracy is read from the generations and the split's question types
        inputs.append(TEST_DATA)
    return inputs + eval_targets()


rule report:
    input:
        report_inputs,
        test_accuracy_targets(),
        seed_targets(),
        code=package_sources("report", "config.py"),
    output:
        html=report(
            "results/report/index.html",
            caption="../workflow/report/report.rst",
            category="Report",
        ),
        metrics="results/report/metrics.json",
    params:
        config=lambda wildcards: json.dumps(to_plain(CFG.resolved), sort_keys=True),
    log:
        "results/logs/report/report.log",
    benchmark:
        "results/benchmarks/report/report.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl report --config {params.config:q} --results results --out-dir results/report > {log:q} 2>&1"
