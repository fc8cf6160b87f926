# The data stage: every dataset the series read, split by split, into chartrl's parquet contract
# (chartrl.data.contract), then one card per dataset (counts, box coverage, rejected rows and why) with a sample
# sheet and an MLflow run.
include: "helpers/data.smk"


rule data_split:
    input:
        sources=data_source_files,
    output:
        parquet="results/data/{dataset}/{split}.parquet",
        rejects="results/data/{dataset}/{split}.rejects.json",
    params:
        spec=data_split_spec,
        code=data_split_code,
        root=DATA_ROOT,
        box_floor=data_box_floor,
    threads: 2
    log:
        "results/logs/data/{dataset}/{split}.log",
    benchmark:
        "results/benchmarks/data/{dataset}/{split}.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl data build --spec {params.spec:q} --split {wildcards.split} --root {params.root:q}"
        " --threads {threads} --out {output.parquet:q} --rejects {output.rejects:q} {params.box_floor}"
        " > {log:q} 2>&1"


rule data_card:
    input:
        parquets=lambda wildcards: data_split_outputs(wildcards, "parquet"),
        rejects=lambda wildcards: data_split_outputs(wildcards, "rejects"),
    output:
        card="results/data/{dataset}/card.json",
        samples=report(
            "results/data/{dataset}/samples.png",
            caption="../workflow/report/data_samples.rst",
            category="Data",
            subcategory="{dataset}",
        ),
    params:
        spec=data_card_spec,
        code=data_card_code,
        samples=CFG.samples_in_card,
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    log:
        "results/logs/data/{dataset}/card.log",
    benchmark:
        "results/benchmarks/data/{dataset}/card.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl data card --spec {params.spec:q} --parquets {input.parquets:q} --rejects {input.rejects:q}"
        " --out {output.card:q} --samples {output.samples:q} --samples-n {params.samples}"
        " --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q} > {log:q} 2>&1"
