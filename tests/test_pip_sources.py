"""``make setup`` installs the lock file with uv from the sources pip is configured with
(requirements/pip_sources.py): every find-links folder, index and constraint file pip would read is passed on."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("pip_sources", REPO / "requirements" / "pip_sources.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pip_sources_become_uv_options():
    options = _module().uv_options(
        {
            "find-links": "/opt/wheels",
            "extra-index-url": "file:///opt/a/simple file:///opt/b/simple",
            "constraint": "/etc/pip/constraints.txt",
            "cert": "/etc/ssl/certs/ca-certificates.crt",
        }
    )
    assert options == [
        "--find-links", "/opt/wheels",
        "--extra-index-url", "file:///opt/a/simple",
        "--extra-index-url", "file:///opt/b/simple",
        "--index-url", "https://pypi.org/simple",  # pip still reads PyPI beside its extra indexes
        "--constraint", "/etc/pip/constraints.txt",
        "--index-strategy", "unsafe-best-match",  # pip's rule: the best match over all indexes
    ]  # fmt: skip


def test_no_pip_configuration_leaves_uv_on_pypi():
    assert _module().uv_options({}) == ["--index-strategy", "unsafe-best-match"]
    assert _module().uv_options({"index-url": "https://mirror/simple"})[:2] == ["--index-url", "https://mirror/simple"]


@pytest.mark.slow
def test_pip_config_is_read_from_this_python(monkeypatch):
    """Files and PIP_* variables both show in ``pip config list``; the environment comes last and wins."""
    monkeypatch.setenv("PIP_FIND_LINKS", "/tmp/chartrl-wheels")
    settings = _module().pip_config()
    assert settings["find-links"] == "/tmp/chartrl-wheels"
