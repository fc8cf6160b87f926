"""Fixtures of the verl backend tests.

pytest imports every conftest under the one module name ``conftest``: once this file is loaded, ``from conftest
import ...`` in a test folder collected after this one (sorted after ``verl_backend``) gets this module, not
``tests/conftest.py``. Keep such tests in folders that sort before it, or give them fixtures instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def gpu_config():
    """The real study's config (backend verl), as Snakemake loads it."""
    from chartrl.config import load_config

    return load_config([REPO / "config" / "gpu.yaml"], root=REPO)


@pytest.fixture(scope="module")
def standin_served():
    """The module's stand-in runs fork from one preloaded stand-in server (``verl_standin.SERVED``)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHARTRL_FORKSERVER", "on")
        patch.setenv("STANDIN_FORKSERVER", "on")
        yield


@pytest.fixture(autouse=True)
def _quiet_verl_tool_schema_print(capsys):
    """verl's BaseTool prints each tool schema on construction."""
    yield
    capsys.readouterr()
