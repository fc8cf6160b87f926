# The report: training curves per reward generation, matched-step and test tables, the diagonal check with its
# disagreements, rollouts, every series' config and the limits of the run; metrics.json holds every number.
include: "helpers/report.smk"


rule report:
    input:
        report_inputs,
        test_accuracy_targets(),
        seed_targets(),
        test_curve_targets(),
    output:
        html=report(
            "results/report/index.html",
            caption="../workflow/report/report.rst",
            category="Report",
        ),
        metrics="results/report/metrics.json",
    params:
        config=lambda wildcards: json.dumps(chartrl.to_plain(CFG.resolved), sort_keys=True),  # the report shows it all
        code=job_code(
            "report",
            uses=lambda wildcards: chartrl.report_code(CFG),
            spec=lambda wildcards: json.dumps(chartrl.to_plain(CFG.resolved)),
        ),
    log:
        "results/logs/report/report.log",
    benchmark:
        "results/benchmarks/report/report.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "chartrl report --config {params.config:q} --results results --out-dir results/report > {log:q} 2>&1"
