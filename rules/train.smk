# The train stage: one RL run per train series (e1, e2, e3, e6, e7, e10, e11, e12), differing only by config, run
# through the launcher (launcher: inline | ray; rules/launch.smk). Local backend: chartrl's GRPO / Dr.GRPO trainer.
# verl backend: verl.trainer.main_ppo with the series' Hydra overrides written out in the command (`snakemake -n -p`
# shows them; so does `chartrl verl overrides --series ID`). Checkpoints live in the run's folder under
# checkpoints/ (not outputs, so a killed job rerun with --rerun-incomplete resumes from them); run.json is written
# last.
#
# More seeds (extra_seeds, off in the embedded default): every train series trained again from the same starting
# model with another train seed, so the report can show the spread. The main run (train.seed) keeps its own
# paths; the other seeds live under results/seeds/{series}/seed{seed}/, and their MLflow runs have names of their
# own ({series}/train/seed{seed}), so they never supersede the main run.
include: "helpers/train.smk"


# One rule body for every train run: `train` (a series' main run) and `train_seed` (its extra seeds).
for train_run in TRAIN_RUNS:

    rule:
        name:
            train_run.rule_name
        input:
            model=policy_model,  # the warm-started model (verl starts from it too) unless model.path is set
            train=lambda wildcards: series_split(wildcards.series, "train"),
            val=lambda wildcards: series_split(wildcards.series, "val"),
            code=TRAIN_CODE,
        output:
            run=f"{train_run.folder}/run.json",
            metrics=f"{train_run.folder}/metrics.jsonl",
        params:
            spec=train_job_spec,
            launch=train_launch,
            tracking_uri=CFG.mlflow.tracking_uri,
            experiment=CFG.mlflow.experiment,
            **verl_only(overrides=verl_train_overrides),
        wildcard_constraints:
            **train_run.patterns,
        threads: 1 if VERL else CFG.train.threads  # a verl job's driver; its workers hold the GPUs (resources)
        resources:
            **verl_only(gpu=VERL_JOB_GPUS),
        log:
            f"results/logs/{train_run.log_name}.log",
        benchmark:
            f"results/benchmarks/{train_run.log_name}.tsv"
        conda:
            "../envs/gpu.yaml" if VERL else "../envs/cpu.yaml"
        shell:
            train_shell(train_run)
