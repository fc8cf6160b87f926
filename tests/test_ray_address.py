"""Which Ray addresses the launcher accepts: the dashboard's job API (what ``ray job submit`` talks to), written
with or without ``http://``; a GCS address, a Ray client address and the like are refused, from ray.address when
the config is checked and from RAY_ADDRESS at launch (and when the workflow starts), each saying which address to
use instead."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from chartrl.config import ConfigError, parse_config
from chartrl.launch import LaunchError, ray_address

from conftest import REPO, raw_default_config, snakemake

ACCEPTED = [
    ("http://head-node:8265", "http://head-node:8265"),
    ("https://ray.example.org", "https://ray.example.org"),  # behind a proxy, on its own port
    ("http://10.0.0.5:8265/", "http://10.0.0.5:8265/"),
    ("head-node:8265", "http://head-node:8265"),  # Ray itself reads a bare host:port as http
    ("127.0.0.1:50123", "http://127.0.0.1:50123"),  # a local head's job API on its own port block
]
REFUSED = [
    ("head-node:6379", "is the GCS port", "http://head-node:8265"),
    ("http://head-node:6379", "is the GCS port", "http://head-node:8265"),
    ("ray://head-node:10001", "is a Ray client address", "http://head-node:8265"),
    ("head-node:10001", "is the Ray client port", "http://head-node:8265"),
    ("grpc://head-node:8265", "has the scheme grpc://", "http://head-node:8265"),
    ("auto", "asks ray.init to find or start a cluster", "unset RAY_ADDRESS and ray.address"),
    ("head-node", "names no port", "http://head-node:8265"),
]


@pytest.mark.parametrize("address, expected", ACCEPTED)
def test_job_api_addresses_are_accepted(address, expected):
    assert ray_address(None, {"RAY_ADDRESS": address}) == expected
    assert ray_address(address, {}) == expected
    raw = raw_default_config()
    raw["ray"] = {**raw.get("ray", {}), "address": address}
    assert parse_config(raw).ray.address == address


@pytest.mark.parametrize("address, why, use", REFUSED)
def test_ray_address_in_the_environment_is_refused_at_launch(address, why, use):
    with pytest.raises(LaunchError) as raised:
        ray_address("http://ignored:8265", {"RAY_ADDRESS": address})  # RAY_ADDRESS wins, so it is the one checked
    message = str(raised.value)
    assert message.startswith(f"RAY_ADDRESS {address!r} ") and why in message and use in message


@pytest.mark.parametrize("address, why, use", REFUSED)
def test_ray_address_in_the_config_is_refused_at_config_check(address, why, use):
    raw = raw_default_config()
    raw["ray"] = {**raw.get("ray", {}), "address": address}
    with pytest.raises(ConfigError) as raised:
        parse_config(raw)
    message = str(raised.value)
    assert f"config key 'ray.address': value {address!r} " in message and why in message and use in message


@pytest.mark.slow
def test_chartrl_launch_refuses_a_gcs_address_before_submitting():
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "RAY_ADDRESS": "head-node:6379"}
    result = subprocess.run(
        [sys.executable, "-m", "chartrl", "launch", "--launcher", "ray", "--submission-id", "x", "--", "true"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "RAY_ADDRESS 'head-node:6379' is the GCS port" in result.stderr and "http://head-node:8265" in result.stderr


@pytest.mark.slow
def test_the_workflow_stops_on_a_gcs_ray_address_before_any_job(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "head-node:6379")
    result = snakemake(tmp_path, "-n", "--config", "launcher=ray", check=False)  # the embedded default runs inline
    assert result.returncode != 0
    assert "RAY_ADDRESS 'head-node:6379' is the GCS port" in result.stdout + result.stderr


@pytest.mark.slow
def test_an_inline_workflow_reads_no_ray_address(tmp_path, monkeypatch):
    """With launcher: inline no job is submitted to Ray (a verl job starts its own), so RAY_ADDRESS is not read."""
    monkeypatch.setenv("RAY_ADDRESS", "head-node:6379")
    result = snakemake(tmp_path, "-n", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
