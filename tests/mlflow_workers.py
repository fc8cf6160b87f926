"""Work for processes a test spawns. It lives apart from the test modules: a spawned process imports the module of
the function it runs, and a test module's ``from conftest import ...`` would then meet whichever conftest comes
first on the inherited sys.path (tests/verl_backend's, once that folder has been collected)."""

from __future__ import annotations

from chartrl import tracking
from chartrl.config import MlflowSettings


def log_one_run(args):
    """One data-stage run in the store ``uri``; its run id."""
    uri, name = args
    settings = MlflowSettings(tracking_uri=uri, experiment="concurrent")
    with tracking.stage_run(settings, f"{name}/data", {"stage": "data"}, {"n": 1}) as run:
        run.log_metrics({"rows": 1})
    return run.run_id
