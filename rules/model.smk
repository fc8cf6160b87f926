# The embedded default's policy: a tiny Qwen2.5-VL-architecture model built offline, then warm-started on
# synthetic demonstrations (the train dataset's train split), so that RL starts from a policy that writes the answer
# format and calls tools, and checked on its val split. With model.path set (the GPU config) these rules are not in
# the DAG.
include: "helpers/model.smk"


rule base_model:
    output:
        directory("results/models/tiny"),
    params:
        spec=job_spec("model tiny"),
        code=job_code("model tiny"),
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
        # Read only to refuse, before minutes of training, a val split too small for the check; not trained on, so
        # ancient: a new val split reruns the check, not the warm start.
        val=ancient(f"results/data/{TRAIN_DATASET}/val.parquet"),
    output:
        directory("results/models/base"),
    params:
        spec=job_spec("warmstart"),
        code=job_code("warmstart", spec=job_spec("warmstart")),
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
        "chartrl warmstart --model {input.model:q} --train {input.train:q} --val {input.val:q} --out {output:q}"
        " --spec {params.spec:q} --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q}"
        " > {log:q} 2>&1"


# The after-warm-start check (chartrl.warmstart.check): the warm-started model's rollouts on the first
# warmstart.eval_rows val questions, sampled and greedy, with and without tools, each next to its shuffled-image
# control, and a gallery. A rule of its own, outside the model folder the train series read: the rollout settings
# it samples with rerun it, not the warm start or the training. MLflow run base/warmstart_check, nested under
# base/warmstart.
rule warmstart_check:
    input:
        model="results/models/base",
        val=f"results/data/{TRAIN_DATASET}/val.parquet",
    output:
        check="results/models/warmstart_check.json",
        gallery=report(
            "results/models/warmstart_gallery.png",
            caption="../workflow/report/warmstart_gallery.rst",
            category="Model",
        ),
    params:
        spec=job_spec("warmstart-check"),
        code=job_code("warmstart-check", spec=job_spec("warmstart-check")),
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    threads: CFG.evaluate.threads  # an evaluation of the warm-started model, as its test-accuracy jobs
    log:
        "results/logs/model/warmstart_check.log",
    benchmark:
        "results/benchmarks/model/warmstart_check.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl warmstart-check --model {input.model:q} --val {input.val:q} --out {output.check:q}"
        " --gallery {output.gallery:q} --spec {params.spec:q} --threads {threads}"
        " --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q} > {log:q} 2>&1"
