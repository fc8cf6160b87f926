# The embedded default's policy: a tiny Qwen2.5-VL-architecture model built offline, then warm-started on
# synthetic demonstrations (the train dataset's train and val splits), so that RL starts from a policy that writes
# the answer format and calls tools. With model.path set (the GPU config) these rules are not in the DAG.
include: "helpers/model.smk"


rule base_model:
    input:
        code=MODEL_CODE,
    output:
        directory("results/models/tiny"),
    params:
        spec=lambda wildcards: config_slice("model", "tools"),
    log:
        "results/logs/model/base_model.log",
    benchmark:
        "results/benchmarks/model/base_model.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl model tiny --out {output:q} --spec {params.spec:q} > {log:q} 2>&1"


rule warmstart:
    input:
        model="results/models/tiny",
        train=f"results/data/{TRAIN_DATASET}/train.parquet",
        val=f"results/data/{TRAIN_DATASET}/val.parquet",
        code=MODEL_CODE,
    output:
        model=directory("results/models/base"),
        gallery=report(
            "results/models/warmstart_gallery.png",
            caption="../workflow/report/warmstart_gallery.rst",
            category="Model",
        ),
    params:
        spec=lambda wildcards: config_slice("warmstart", "prompts", "tools", "rollout"),
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    threads: CFG.warmstart.threads
    log:
        "results/logs/model/warmstart.log",
    benchmark:
        "results/benchmarks/model/warmstart.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl warmstart --model {input.model:q} --train {input.train:q} --val {input.val:q}"
        " --out {output.model:q} --gallery {output.gallery:q} --spec {params.spec:q}"
        " --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q} > {log:q} 2>&1"
