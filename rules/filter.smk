# The shortcut filter (a stage between data and training, for each dataset whose section sets shortcut_filter):
# the starting policy answers each examined train question k times without a usable chart (a blank image, and the
# shuffled-image control); questions it answers right in at least `threshold` of those answers are shortcut
# questions, removed from (or down-weighted in) the train split that series with `shortcut_filter: true` read.
# Local backend: the answers are sampled by chartrl; verl backend: by a verl generation job (trainer.val_only).
# The decision, the filtered split and the card are the same code on both (chartrl.evaluate.shortcut).
include: "helpers/filter.smk"


rule shortcut_answers:
    input:
        model=policy_model,
        train="results/data/{dataset}/train.parquet",
    output:
        "results/filter/{dataset}/answers.parquet",
    params:
        spec=shortcut_answers_spec,
        code=shortcut_answers_code,
        launch=shortcut_answers_launch,
        model=filter_model,
        **verl_only(overrides=verl_shortcut_overrides),
    wildcard_constraints:
        dataset="|".join(FILTER_DATASETS) or "(?!)",
    threads: 1 if VERL else CFG.evaluate.threads
    resources:
        **verl_only(**VERL_JOB_RESOURCES),
    log:
        "results/logs/filter/{dataset}/answers.log",
    benchmark:
        "results/benchmarks/filter/{dataset}/answers.tsv"
    conda:
        "../envs/gpu.yaml" if VERL else "../envs/cpu.yaml"
    shell:
        shortcut_answers_shell()


rule shortcut_filter:
    input:
        answers="results/filter/{dataset}/answers.parquet",
        train="results/data/{dataset}/train.parquet",
    output:
        train="results/filter/{dataset}/train.parquet",
        card="results/filter/{dataset}/card.json",
    params:
        spec=shortcut_filter_spec,
        code=job_code("shortcut filter"),
        backend=CFG.backend,
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        dataset="|".join(FILTER_DATASETS) or "(?!)",
    log:
        "results/logs/filter/{dataset}/filter.log",
    benchmark:
        "results/benchmarks/filter/{dataset}/filter.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl shortcut filter --spec {params.spec:q} --data {input.train:q} --answers {input.answers:q}"
        " --out {output.train:q} --card {output.card:q} --backend {params.backend}"
        " --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q} > {log:q} 2>&1"
