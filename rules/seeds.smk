# More seeds (config key extra_seeds, off in the embedded default): every train series trained again from the same
# warm-started model with another train seed, and tested like the main run, so the report can show the spread.
# The main run (train.seed) keeps its own paths; the other seeds live under results/seeds/{series}/seed{seed}/, and
# their MLflow runs have names of their own ({series}/train/seed{seed}, {series}/test/seed{seed}), so they never
# supersede the main run.


rule train_seed:
    input:
        model=policy_model,
        train=lambda wildcards: series_split(wildcards.series, "train"),
        val=lambda wildcards: series_split(wildcards.series, "val"),
        code=TRAIN_CODE,
    output:
        run="results/seeds/{series}/seed{seed}/run.json",
        metrics="results/seeds/{series}/seed{seed}/metrics.jsonl",
    params:
        spec=seed_train_spec,
        launch=lambda wildcards: local_launch(
            "train", f"{wildcards.series}-seed{wildcards.seed}", seed_train_spec(wildcards), CFG.train.threads
        ),
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        series="|".join(TRAIN_SERIES) or "(?!)",
        seed=r"\d+",
    threads: CFG.train.threads
    log:
        "results/logs/seeds/{series}/seed{seed}/train.log",
    benchmark:
        "results/benchmarks/seeds/{series}/seed{seed}/train.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "{params.launch} chartrl train --spec {params.spec:q} --model {input.model:q} --train {input.train:q} --val {input.val:q}"
        " --out results/seeds/{wildcards.series}/seed{wildcards.seed} --tracking-uri {params.tracking_uri:q}"
        " --experiment {params.experiment:q} --extra-seed {wildcards.seed} > {log:q} 2>&1"


rule seed_test_accuracy:
    input:
        run="results/seeds/{series}/seed{seed}/run.json",
        data=TEST_DATA,
        code=EVAL_CODE,
    output:
        "results/seeds/{series}/seed{seed}/test_accuracy.json",
    params:
        spec=lambda wildcards: test_accuracy_spec(wildcards.series),
        launch=lambda wildcards: local_launch(
            "test", f"{wildcards.series}-seed{wildcards.seed}", test_accuracy_spec(wildcards.series)
        ),
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        series="|".join(TRAIN_SERIES) or "(?!)",
        seed=r"\d+",
    threads: CFG.evaluate.threads
    log:
        "results/logs/seeds/{series}/seed{seed}/test_accuracy.log",
    benchmark:
        "results/benchmarks/seeds/{series}/seed{seed}/test_accuracy.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "{params.launch} chartrl test-accuracy --spec {params.spec:q} --run {input.run:q} --data {input.data:q}"
        " --out {output:q} --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q}"
        " --extra-seed {wildcards.seed} > {log:q} 2>&1"
