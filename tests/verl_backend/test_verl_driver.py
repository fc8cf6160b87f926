"""A verl job refuses a node whose NVIDIA driver cannot run its environment's CUDA wheels (requirements/gpu.lock is
CUDA 13: driver R580 or newer), before verl starts, naming the driver, the floor and the ways out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chartrl.verl_backend.driver import driver_problem

REPO = Path(__file__).resolve().parents[2]

DRIVER_CASES = [
    # (the node's driver, the CUDA major of the environment's wheels, refused)
    ("535.183.01", 13, True),  # a common cluster driver (CUDA 12.2): too old for CUDA 13
    ("570.124.06", 13, True),
    ("580.65.06", 13, False),  # the floor itself
    ("580.95.05", 13, False),
    ("590.44.01", 13, False),
    ("535.183.01", 12, False),  # a cu12.8 environment runs on it (minor-version compatibility)
    ("470.256.02", 12, True),
    (None, 13, False),  # no nvidia-smi here (a CPU node running a Ray job's driver): not checked
    ("535.183.01", None, False),  # no CUDA wheels in the environment: not checked
]


@pytest.mark.parametrize("driver, cuda, refused", DRIVER_CASES)
def test_the_driver_floor_follows_the_cuda_wheels(driver, cuda, refused):
    problem = driver_problem(driver, cuda)
    assert (problem is not None) == refused
    if refused:
        assert f"driver {driver} is older than" in problem and "docs/cluster.md" in problem


def verl_train_on_a_node_with_driver(tmp_path: Path, driver: str) -> subprocess.CompletedProcess:
    """``chartrl verl train`` where ``nvidia-smi`` reports ``driver`` (this environment holds CUDA 13 wheels)."""
    (tmp_path / "nvidia-smi").write_text(f"#!/bin/sh\necho {driver}\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [sys.executable, "-m", "chartrl", "verl", "train", "--spec", "{}", "--train", "t", "--val", "v", "--out", "o",
         "--", "trainer.total_training_steps=1"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.slow
def test_a_verl_job_refuses_a_driver_older_than_its_cuda_needs(tmp_path):
    from chartrl.verl_backend.driver import environment_cuda_major

    assert environment_cuda_major() == 13  # the CPU lock's torch is the CUDA 13 build too (PyPI's default)
    result = verl_train_on_a_node_with_driver(tmp_path, "570.124.06")
    assert result.returncode == 1
    assert "this node's NVIDIA driver 570.124.06 is older than 580.65.06" in result.stderr


@pytest.mark.slow
def test_a_recent_driver_lets_the_job_go_on(tmp_path):
    result = verl_train_on_a_node_with_driver(tmp_path, "580.95.05")
    assert "NVIDIA driver" not in result.stderr  # it went on (and stopped at the empty spec)
