# The train stage: one RL run per train series (e1, e2, e3, e6, e7, e10, e11, e12), differing only by config, run
# through the launcher (launcher: inline | ray; rules/launch.smk). Local backend: chartrl's GRPO / Dr.GRPO trainer.
# verl backend: verl.trainer.main_ppo with the series' Hydra overrides written out in the command (`snakemake -n -p`
# shows them; so does `chartrl verl overrides --series ID`). Checkpoints live in the run's folder under
# checkpoints/ (not outputs, so a killed job rerun with --rerun-incomplete resumes from them); run.json is written
# last.
#
# More seeds (extra_seeds): the train series the hypotheses compare (Config.seeded_series) trained again from the same
# starting model with other train seeds, so every verdict rests on every seed and the report can show the spread. The main run (train.seed) keeps its own
# paths; the other seeds live under results/seeds/{series}/seed{seed}/, and their MLflow runs have names of their
# own ({series}/train/seed{seed}), so they never supersede the main run.
include: "helpers/train.smk"


rule train:
    input:
        model=policy_model,  # the warm-started model (verl starts from it too) unless model.path is set
        train=lambda wildcards: series_split(wildcards.series, "train"),
        val=lambda wildcards: series_split(wildcards.series, "val"),
    output:
        run="results/runs/{series}/run.json",
        metrics="results/runs/{series}/metrics.jsonl",
    params:
        spec=train_job_spec,
        code=train_job_code,
        launch=train_launch,
        out=train_folder,
        extra_seed=extra_seed_argument,
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
        **verl_only(overrides=verl_train_overrides),
    threads: 1 if VERL else CFG.train.threads  # a verl job's driver; its workers hold the GPUs (resources)
    priority: train_priority
    resources:
        **verl_only(**VERL_JOB_RESOURCES),
    log:
        "results/logs/train/{series}.log",
    benchmark:
        "results/benchmarks/train/{series}.tsv"
    conda:
        "../envs/gpu.yaml" if VERL else "../envs/cpu.yaml"
    shell:
        train_shell()


# An extra seed's run: the same job in its own folder, with train.seed set to the seed (extra seeds run on the
# local backend only: seed_targets, rules/helpers/evaluate.smk, asks for none on verl).
use rule train as train_seed with:
    output:
        run="results/seeds/{series}/seed{seed}/run.json",
        metrics="results/seeds/{series}/seed{seed}/metrics.jsonl",
    wildcard_constraints:
        series="|".join(SEEDED_SERIES) or "(?!)",
        seed=r"\d+",
    log:
        "results/logs/seeds/{series}/seed{seed}/train.log",
    benchmark:
        "results/benchmarks/seeds/{series}/seed{seed}/train.tsv"
