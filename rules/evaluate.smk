# Test evaluation: generations for each checkpoint an eval series names (produced once: e8 and e9 read e6's,
# e13 and e14 read e10's), scored by each series' scorers, and the diagonal check where one checkpoint is scored
# twice (rule against judge or panel). Generate jobs run through the launcher (rules/launch.smk); on the verl
# backend a generate job merges the checkpoint, runs verl with trainer.val_only and converts its dump. On the local
# backend, the test accuracy per question type of every train run and of the warm-started starting point.
include: "helpers/evaluate.smk"


rule generate:
    input:
        run=eval_train_run,
        data=eval_data,
    output:
        generations="results/eval/{series}/generations.parquet",
        gallery=report(
            "results/eval/{series}/gallery.png",
            caption="../workflow/report/eval_gallery.rst",
            category="Evaluation",
            subcategory="{series}",
        ),
    params:
        spec=generate_job_spec,
        code=job_code("launch", GENERATE_COMMAND, spec=generate_job_spec),
        launch=generate_launch,
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
        **verl_only(overrides=verl_generate_overrides),
    wildcard_constraints:
        series="|".join(GENERATING_SERIES) or "(?!)",
    threads: 1 if VERL else CFG.evaluate.threads
    resources:
        **verl_only(**VERL_JOB_RESOURCES),
    log:
        "results/logs/eval/{series}/generate.log",
    benchmark:
        "results/benchmarks/eval/{series}/generate.tsv"
    conda:
        "../envs/gpu.yaml" if VERL else "../envs/cpu.yaml"
    shell:
        generate_shell()


rule score:
    input:
        generations=lambda wildcards: generations_of(wildcards.series),
        run=eval_train_run,
    output:
        "results/eval/{series}/scores_{scorer}.json",
    params:
        spec=score_job_spec,
        code=job_code("score", uses=scorer_code, spec=score_job_spec),
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        scorer="rule|judge|panel|r1v|multiple_choice",
    # A judge or panel score talks to an endpoint: the client retries each request with backoff, and a rule-level
    # retry covers an outage longer than that (verdicts already given are cached, so a retry asks only the rest).
    retries: 2
    resources:
        mem_mb=2048,
    log:
        "results/logs/eval/{series}/score_{scorer}.log",
    benchmark:
        "results/benchmarks/eval/{series}/score_{scorer}.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl score --spec {params.spec:q} --run {input.run:q} --scorer {wildcards.scorer}"
        " --generations {input.generations:q} --out {output:q}"
        " --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q} > {log:q} 2>&1"


# A cell of the reward x scorer matrix that no eval series asks for: a checkpoint's generations scored by another
# scorer (chartrl.evaluate.matrix), under the series that generates them; MLflow run {series}/matrix/{scorer}.
rule matrix_score:
    input:
        generations=lambda wildcards: generations_of(wildcards.series),
        run=eval_train_run,
    output:
        "results/eval/{series}/matrix_scores_{scorer}.json",
    params:
        spec=score_job_spec,  # a matrix cell is scored as the score rule scores
        code=job_code("score", uses=scorer_code, spec=score_job_spec),
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        series="|".join(GENERATING_SERIES) or "(?!)",
        scorer="rule|judge|panel",
    retries: 2
    resources:
        mem_mb=2048,
    log:
        "results/logs/eval/{series}/matrix_score_{scorer}.log",
    benchmark:
        "results/benchmarks/eval/{series}/matrix_score_{scorer}.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl score --matrix --spec {params.spec:q} --run {input.run:q} --scorer {wildcards.scorer}"
        " --generations {input.generations:q} --out {output:q}"
        " --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q} > {log:q} 2>&1"


rule diagonal:
    input:
        first=lambda wildcards: DIAGONALS[wildcards.series][0],
        second=lambda wildcards: DIAGONALS[wildcards.series][1],
        run=eval_train_run,
    output:
        "results/eval/{series}/diagonal.json",
    params:
        spec=diagonal_job_spec,
        code=job_code("diagonal"),
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        series="|".join(DIAGONALS) or "(?!)",
    log:
        "results/logs/eval/{series}/diagonal.log",
    benchmark:
        "results/benchmarks/eval/{series}/diagonal.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl diagonal --spec {params.spec:q} --run {input.run:q} --first {input.first:q}"
        " --second {input.second:q} --out {output:q}"
        " --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q} > {log:q} 2>&1"


# Best-of-N reranking at test time (an eval series' `rerank`): N sampled responses per question of a fixed subset
# (results/eval/{series}/rerank.parquet), then per scorer each method's chosen answers scored beside the series'
# own (greedy) answers on the same questions (rerank_{scorer}.json). The greedy generations stay as they are.
rule rerank:
    input:
        run=eval_train_run,
        data=eval_data,
    output:
        "results/eval/{series}/rerank.parquet",
    params:
        spec=rerank_job_spec,
        code=job_code("launch", "rerank", spec=rerank_job_spec),
        launch=rerank_launch,
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        series="|".join(RERANK_SERIES) or "(?!)",
    threads: CFG.evaluate.threads
    log:
        "results/logs/eval/{series}/rerank.log",
    benchmark:
        "results/benchmarks/eval/{series}/rerank.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "{params.launch} chartrl rerank --spec {params.spec:q} --run {input.run:q} --data {input.data:q}"
        " --out {output:q} --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q} > {log:q} 2>&1"


rule rerank_score:
    input:
        samples="results/eval/{series}/rerank.parquet",
        greedy=lambda wildcards: scores_path(wildcards.series, wildcards.scorer),
        generations=lambda wildcards: generations_of(wildcards.series),
        data=eval_data,
        run=eval_train_run,
    output:
        "results/eval/{series}/rerank_{scorer}.json",
    params:
        spec=rerank_score_job_spec,
        code=job_code("rerank-score", uses=scorer_code, spec=rerank_score_job_spec),
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        series="|".join(RERANK_SERIES) or "(?!)",
        scorer="rule|judge|panel|r1v|multiple_choice",
    retries: 2  # an external scorer or judge endpoint: as rule score (answers obtained are cached)
    resources:
        mem_mb=2048,
    log:
        "results/logs/eval/{series}/rerank_{scorer}.log",
    benchmark:
        "results/benchmarks/eval/{series}/rerank_{scorer}.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl rerank-score --spec {params.spec:q} --run {input.run:q} --scorer {wildcards.scorer}"
        " --samples {input.samples:q} --greedy-scores {input.greedy:q} --generations {input.generations:q}"
        " --data {input.data:q} --out {output:q}"
        " --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q} > {log:q} 2>&1"


# Test accuracy per question type of every train series (last checkpoint) and of the warm-started starting point
# (with and without tools), each next to its shuffled-image control: what the report's per-type table,
# tool-vs-no-tool gaps and bootstrap intervals are computed from. Also logged as the MLflow run {series}/test
# (warmstart/test/tools_{mode}), nested under the train run it read.
rule test_accuracy:
    input:
        run="results/runs/{series}/run.json",
        data=TEST_DATA,
    output:
        "results/eval/{series}/test_accuracy.json",
    params:
        spec=lambda wildcards: test_accuracy_spec(wildcards.series),
        code=job_code("launch", "test-accuracy", spec=lambda wildcards: test_accuracy_spec(wildcards.series)),
        launch=test_accuracy_launch,
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        series="|".join(TRAIN_SERIES) or "(?!)",
    threads: CFG.evaluate.threads
    log:
        "results/logs/eval/{series}/test_accuracy.log",
    benchmark:
        "results/benchmarks/eval/{series}/test_accuracy.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "{params.launch} chartrl test-accuracy --spec {params.spec:q} --run {input.run:q} --data {input.data:q}"
        " --out {output:q} --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q} > {log:q} 2>&1"


# The test curve of each train series an eval series reads: greedy test accuracy of every checkpoint its run kept, on
# the first evaluate.curve_rows test questions, with each eval series' chosen checkpoint marked. The last checkpoint
# and step 0 are read from test_accuracy.json and the warm start's, not rerun. MLflow run {series}/test_curve.
rule test_curve:
    input:
        run="results/runs/{series}/run.json",
        data=TEST_DATA,
        last="results/eval/{series}/test_accuracy.json",
        start=test_curve_start,
    output:
        "results/eval/{series}/test_curve.json",
    params:
        spec=lambda wildcards: test_curve_spec(wildcards.series),
        code=job_code("launch", "test-curve", spec=lambda wildcards: test_curve_spec(wildcards.series)),
        start=lambda wildcards, input: f"--start {shlex.quote(input.start)}" if input.start else "",
        launch=lambda wildcards: local_launch("test-curve", wildcards.series, test_curve_spec(wildcards.series)),
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        series="|".join(CURVE_SERIES) or "(?!)",
    threads: CFG.evaluate.threads
    log:
        "results/logs/eval/{series}/test_curve.log",
    benchmark:
        "results/benchmarks/eval/{series}/test_curve.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "{params.launch} chartrl test-curve --spec {params.spec:q} --run {input.run:q} --data {input.data:q}"
        " --last {input.last:q} {params.start} --out {output:q} --tracking-uri {params.tracking_uri:q}"
        " --experiment {params.experiment:q} > {log:q} 2>&1"


# An extra seed's run (extra_seeds; rules/train.smk), tested like the main run: MLflow run {series}/test/seed{seed}.
rule seed_test_accuracy:
    input:
        run="results/seeds/{series}/seed{seed}/run.json",
        data=TEST_DATA,
    output:
        "results/seeds/{series}/seed{seed}/test_accuracy.json",
    params:
        spec=lambda wildcards: test_accuracy_spec(wildcards.series),
        code=job_code("launch", "test-accuracy", spec=lambda wildcards: test_accuracy_spec(wildcards.series)),
        launch=test_accuracy_launch,
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        series="|".join(SEEDED_SERIES) or "(?!)",
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


# An extra seed's diagonal check: for each eval series with one (DIAGONALS) whose train series the extra seeds train,
# that seed's greedy test answers scored by the diagonal's two scorers and compared as the diagonal rule compares
# them, so a hypothesis on drift gets a verdict over seeds. MLflow run {series}/diagonal/seed{seed}.
rule seed_diagonal:
    input:
        answers=lambda wildcards: f"results/seeds/{CFG.series[wildcards.series].of}/seed{wildcards.seed}/test_accuracy.json",
        data=TEST_DATA,
    output:
        "results/seeds/{series}/seed{seed}/diagonal.json",
    params:
        spec=seed_diagonal_job_spec,
        code=job_code("seed-diagonal", uses=diagonal_code),
        scorers=lambda wildcards: " ".join(DIAGONAL_SCORERS[wildcards.series]),
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        series="|".join(SEEDED_DIAGONALS) or "(?!)",
        seed=r"\d+",
    retries: 2  # a judge endpoint: as the score rule (verdicts already given are cached)
    log:
        "results/logs/seeds/{series}/seed{seed}/diagonal.log",
    benchmark:
        "results/benchmarks/seeds/{series}/seed{seed}/diagonal.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl seed-diagonal --spec {params.spec:q} --test-accuracy {input.answers:q} --data {input.data:q}"
        " --scorers {params.scorers} --extra-seed {wildcards.seed} --out {output:q}"
        " --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q} > {log:q} 2>&1"


rule warmstart_test_accuracy:
    input:
        model="results/models/base",
        data=TEST_DATA,
    output:
        "results/eval/warmstart/test_accuracy_tools_{mode}.json",
    params:
        spec=lambda wildcards: test_accuracy_spec("warmstart"),
        code=job_code("launch", "test-accuracy", spec=lambda wildcards: test_accuracy_spec("warmstart")),
        launch=lambda wildcards: local_launch(
            "test", f"warmstart-tools-{wildcards.mode}", test_accuracy_spec("warmstart")
        ),
        tracking_uri=CFG.mlflow.tracking_uri,
        experiment=CFG.mlflow.experiment,
    wildcard_constraints:
        mode="on|off",
    threads: CFG.evaluate.threads
    log:
        "results/logs/eval/warmstart/test_accuracy_tools_{mode}.log",
    benchmark:
        "results/benchmarks/eval/warmstart/test_accuracy_tools_{mode}.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "{params.launch} chartrl test-accuracy --spec {params.spec:q} --model {input.model:q} --tools {wildcards.mode}"
        " --data {input.data:q} --out {output:q} --tracking-uri {params.tracking_uri:q}"
        " --experiment {params.experiment:q} > {log:q} 2>&1"


# The tool-path check (chartrl.rollout.tool_path), where evaluate.tool_path_check asks for it: on every chart of the
# train dataset's splits, a scripted call of each configured label tool that applies to it (not the policy's
# call), run through the rollout's tool turn and second pass; it fails naming each chart and tool that failed.
rule tool_path_check:
    input:
        unpack(tool_path_check_inputs),
    output:
        "results/tools/path_check.json",
    params:
        spec=job_spec("tools path-check"),
        code=job_code("tools path-check", spec=job_spec("tools path-check")),
    threads: CFG.evaluate.threads
    log:
        "results/logs/tools/path_check.log",
    benchmark:
        "results/benchmarks/tools/path_check.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        tool_path_check_shell()
