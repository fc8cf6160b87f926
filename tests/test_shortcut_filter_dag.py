"""The shortcut filter in the DAG: where the stage runs (dry runs of the real workflow), which train series read
the filtered split, and the verl backend's answers job."""

from __future__ import annotations

import pytest

from conftest import REPO, snakemake

pytestmark = pytest.mark.slow


def _job_blocks(stdout: str) -> dict[str, list[str]]:
    """rule name -> the text of each of its planned jobs in a dry run's output."""
    blocks: dict[str, list[str]] = {}
    for block in stdout.split("\nrule ")[1:]:
        name, _, body = block.partition(":")
        blocks.setdefault(name.strip(), []).append(body)
    return blocks


def test_the_stage_runs_on_the_default_and_an_opted_in_series_reads_the_filtered_split(tmp_path):
    overlay = tmp_path / "opt_in.yaml"
    overlay.write_text("series:\n  e1: {shortcut_filter: true}\n")
    blocks = _job_blocks(
        snakemake(tmp_path, "-n", "--configfile", str(REPO / "config/config.yaml"), str(overlay)).stdout
    )
    [answers] = blocks["shortcut_answers"]
    assert "results/filter/synthchart/answers.parquet" in answers and "results/models/base" in answers
    [decision] = blocks["shortcut_filter"]
    assert "results/filter/synthchart/card.json" in decision and "results/filter/synthchart/train.parquet" in decision
    trains = {b.split("series=")[1].split()[0]: b for b in blocks["train"]}
    assert "results/filter/synthchart/train.parquet" in trains["e1"]
    assert all("results/filter/" not in body for series, body in trains.items() if series != "e1")
    [report] = blocks["report"]
    assert "results/filter/synthchart/card.json" in report


def test_no_stage_without_settings_and_a_verl_job_on_verl(tmp_path):
    off = tmp_path / "off.yaml"
    off.write_text("datasets:\n  synthchart:\n    shortcut_filter: {enabled: false}\n")
    blocks = _job_blocks(snakemake(tmp_path, "-n", "--configfile", str(REPO / "config/config.yaml"), str(off)).stdout)
    assert "shortcut_answers" not in blocks and "shortcut_filter" not in blocks and "train" in blocks
    overlay = tmp_path / "verl.yaml"
    overlay.write_text(
        "datasets:\n  chartqa:\n    shortcut_filter: {k: 5, threshold: 0.8}\nseries:\n  e1: {shortcut_filter: true}\n"
    )
    dry = snakemake(
        tmp_path, "-n", "-p", "--resources", "gpu=8", "--configfile", str(REPO / "config/gpu.yaml"), str(overlay)
    )
    blocks = _job_blocks(dry.stdout)
    [answers] = blocks["shortcut_answers"]
    assert "chartrl verl shortcut-answers" in answers and "trainer.val_only=True" in answers
    assert "actor_rollout_ref.rollout.val_kwargs.n=5" in answers and "gpu=8" in answers
    assert "--backend verl" in blocks["shortcut_filter"][0]
    trains = {b.split("series=")[1].split()[0]: b for b in blocks["train"]}
    assert "results/filter/chartqa/train.parquet" in trains["e1"] and "results/filter/" not in trains["e3"]
