"""bench/critical_path.py reads a Snakemake log: jobs, their dependencies through files, the critical path and the
stretches with a core idle."""

from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import critical_path  # noqa: E402

LOG = """\
Building DAG of jobs...
[Sun Dec  6 16:00:00 2026]
localrule data:
    output: results/data/train.parquet
    log: results/logs/data.log
    jobid: 1
    threads: 2
    resources: tmpdir=/tmp
Shell command: chartrl data
[Sun Dec  6 16:00:10 2026]
Finished jobid: 1 (Rule: data)
[Sun Dec  6 16:00:10 2026]
localrule warmstart:
    input: results/data/train.parquet
    output: results/models/base
    jobid: 2
    threads: 2
Shell command: chartrl warmstart
[Sun Dec  6 16:01:50 2026]
Finished jobid: 2 (Rule: warmstart)
[Sun Dec  6 16:01:50 2026]
localrule train:
    input: results/models/base, results/data/train.parquet
    output: results/runs/e1/run.json
    jobid: 3
    wildcards: series=e1
[Sun Dec  6 16:01:50 2026]
localrule train:
    input: results/models/base/config.json
    output: results/runs/e3/run.json
    jobid: 4
    wildcards: series=e3
[Sun Dec  6 16:02:20 2026]
Finished jobid: 4 (Rule: train)
[Sun Dec  6 16:02:50 2026]
Finished jobid: 3 (Rule: train)
[Sun Dec  6 16:02:50 2026]
localrule report:
    input: results/runs/e1/run.json, results/runs/e3/run.json
    output: results/report/index.html
    jobid: 5
[Sun Dec  6 16:02:55 2026]
Finished jobid: 5 (Rule: report)
"""


def test_the_critical_path_follows_the_files_and_the_idle_cores_are_found(tmp_path):
    log = tmp_path / "run.snakemake.log"
    log.write_text(LOG)
    jobs = critical_path.parse(log)
    assert [(j.name, j.seconds, j.threads) for j in jobs] == [
        ("data", 10, 2),
        ("warmstart", 100, 2),
        ("train[series=e1]", 60, 1),
        ("train[series=e3]", 30, 1),
        ("report", 5, 1),
    ]
    deps = critical_path.dependencies(jobs)
    assert deps == {1: [], 2: [1], 3: [1, 2], 4: [2], 5: [3, 4]}  # a file under an output folder counts
    assert [j.name for j in critical_path.critical_path(jobs, deps)] == [
        "data",
        "warmstart",
        "train[series=e1]",
        "report",
    ]
    stretches = critical_path.idle_stretches(jobs, cores=2)
    by_start = {round(a - jobs[0].start): (round(b - jobs[0].start), busy) for a, b, busy in stretches}
    assert by_start == {140: (175, 1)}  # e1 alone, then the report alone: one stretch with one thread busy
    text = "\n".join(critical_path.report(jobs, 2, log))
    assert "5 jobs, wall 175 s on 2 cores" in text and "critical path 175 s" in text


def test_a_log_without_finished_jobs_is_named(tmp_path, capsys):
    log = tmp_path / "dry.snakemake.log"
    log.write_text("Building DAG of jobs...\nJob stats:\n")
    assert critical_path.main(["--log", str(log)]) == 2
    assert "no finished job" in capsys.readouterr().err
