# The train stage: one job per train series (e1, e2, e3, e6, e7, e10, e11, e12), differing only by config, run
# through the launcher (launcher: inline | ray; rules/launch.smk). Local backend: chartrl's GRPO / Dr.GRPO trainer.
# verl backend: verl.trainer.main_ppo with the series' Hydra overrides written out in the command (`snakemake -n -p`
# shows them; so does `chartrl verl overrides --series ID`). Checkpoints live in results/runs/{series}/checkpoints/
# (not outputs, so a killed job rerun with --rerun-incomplete resumes from them); run.json is written last.

if CFG.backend == "verl":

    rule train:
        input:
            model=policy_model,  # the warm-started model verl starts from when model.path is unset
            train=lambda wildcards: series_split(wildcards.series, "train"),
            val=lambda wildcards: series_split(wildcards.series, "val"),
            code=TRAIN_CODE,
        output:
            run="results/runs/{series}/run.json",
            metrics="results/runs/{series}/metrics.jsonl",
        params:
            spec=train_job_spec,
            launch=train_launch,
            overrides=verl_train_overrides,
            tracking_uri=CFG.mlflow.tracking_uri,
            experiment=CFG.mlflow.experiment,
        resources:
            gpu=VERL_JOB_GPUS,
        log:
            "results/logs/train/{series}.log",
        benchmark:
            "results/benchmarks/train/{series}.tsv"
        conda:
            "../envs/gpu.yaml"
        shell:
            "{params.launch} chartrl verl train --spec {params.spec:q} --train {input.train:q} --val {input.val:q}"
            " --out results/runs/{wildcards.series} --tracking-uri {params.tracking_uri:q}"
            " --experiment {params.experiment:q} -- {params.overrides} > {log:q} 2>&1"

else:

    rule train:
        input:
            model=policy_model,
            train=lambda wildcards: series_split(wildcards.series, "train"),
            val=lambda wildcards: series_split(wildcards.series, "val"),
            code=TRAIN_CODE,
        output:
            run="results/runs/{series}/run.json",
            metrics="results/runs/{series}/metrics.jsonl",
        params:
            spec=train_job_spec,
            launch=train_launch,
            tracking_uri=CFG.mlflow.tracking_uri,
            experiment=CFG.mlflow.experiment,
        threads: CFG.train.threads
        log:
            "results/logs/train/{series}.log",
        benchmark:
            "results/benchmarks/train/{series}.tsv"
        conda:
            "../envs/cpu.yaml"
        shell:
            "{params.launch} chartrl train --spec {params.spec:q} --model {input.model:q} --train {input.train:q}"
            " --val {input.val:q} --out results/runs/{wildcards.series} --tracking-uri {params.tracking_uri:q}"
            " --experiment {params.experiment:q} > {log:q} 2>&1"
