"""Data-stage benchmarks (part of `make bench`).

- synthetic charts per second: rendering + questions for the embedded default's chart mix, 1 worker process
  against 2 (the 2-core target), the ratio being the parallel speed-up;
- ChartQA sample preprocessing: rows per second through the original-layout reader (decode, RGB PNG, ReFocus
  boxes, contract check) on the 124 records of tests/fixtures/chartqa_real;
- `snakemake -n` wall time on the default config (parse, validate, build the DAG), from a fresh working directory.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO, summary, timed


def bench_synthchart(n_charts: int, repeats: int) -> list[str]:
    from chartrl.config import load_config
    from chartrl.data.stage import collect_split

    config = load_config(root=REPO)
    base = config.datasets["synthchart"]
    dataset = dataclasses.replace(base, options={**base.options, "splits": {"test": n_charts}})
    rates = {}
    for workers in (1, 2):
        times = timed(lambda w=workers: collect_split(dataset, "test", REPO, threads=w), repeats)
        rates[workers] = [n_charts / t for t in times]
    speedup = statistics.median(rates[2]) / statistics.median(rates[1])
    return [
        "## Synthetic charts (data stage)",
        "",
        f"{n_charts} charts of the embedded default's mix (640x480, 2 questions each), {repeats} runs; "
        "min / median / max.",
        "",
        "| workers | charts/s |",
        "|---|---|",
        f"| 1 | {summary(rates[1], 'charts/s')} |",
        f"| 2 | {summary(rates[2], 'charts/s')} |",
        "",
        f"2 workers / 1 worker (median): **{speedup:.2f}x**",
        "",
    ]


def bench_chartqa(repeats: int) -> list[str]:
    from chartrl.data.stage import collect_split

    from conftest import CHARTQA_REAL, dataset_from

    dataset = dataset_from(
        {
            "source": "chartqa_original",
            "path": str(CHARTQA_REAL),
            "splits": ["test"],
            "refocus_boxes": {"test": "test/refocus_chartqa_vcot_test.jsonl"},
        },
        name="chartqa_sample",
    )
    n_rows = len(collect_split(dataset, "test", REPO)[0])
    times = timed(lambda: collect_split(dataset, "test", REPO), repeats)
    return [
        "## ChartQA sample preprocessing (data stage)",
        "",
        f"{n_rows} records / 45 charts of tests/fixtures/chartqa_real through the original-layout reader, "
        f"{repeats} runs.",
        "",
        f"rows/s: {summary([n_rows / t for t in times], 'rows/s')}",
        "",
    ]


def bench_dry_run(repeats: int) -> list[str]:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")

    def dry_run():
        with tempfile.TemporaryDirectory() as workdir:
            subprocess.run(
                [
                    str(Path(sys.executable).parent / "snakemake"),
                    "--snakefile",
                    str(REPO / "Snakefile"),
                    "--workflow-profile",
                    str(REPO / "profiles/default"),
                    "--directory",
                    workdir,
                    "-n",
                    "-q",
                ],
                check=True,
                capture_output=True,
                env=env,
            )

    times = timed(dry_run, repeats)
    return ["## `snakemake -n` (default config)", "", f"wall time: {summary(times)} ({repeats} runs)", ""]


def sections(args) -> list[str]:
    return bench_synthchart(args.charts, args.repeats) + bench_chartqa(args.repeats) + bench_dry_run(args.repeats)
