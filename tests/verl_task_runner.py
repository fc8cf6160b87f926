"""verl's own driver with a printing TaskRunner, for the launch test that follows verl's output into a rule's log.

It composes verl's ``ppo_trainer`` config with a series' overrides (as main_ppo does), then calls verl's
``run_ppo`` with a TaskRunner stand-in: verl's ``ray.init`` with the ``ray_kwargs`` our overrides compose to,
then the runner as a Ray actor, which prints and logs as verl's TaskRunner does (it pprints the config) and never
touches a GPU. Arguments: the config file and the series."""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

import ray


@ray.remote(num_cpus=0)
class PrintingTaskRunner:
    def run(self, config) -> None:
        print(f"task runner actor: training {config.trainer.experiment_name}", flush=True)
        logging.getLogger("verl.trainer").warning("task runner actor: a warning from its logger")


def main(configfile: str, series: str) -> int:
    from hydra import compose, initialize_config_dir
    from verl.trainer.main_ppo import run_ppo

    from chartrl.config import load_config
    from chartrl.verl_backend.overrides import mlflow_overrides, train_overrides

    root = Path(__file__).resolve().parents[1]
    overrides = train_overrides(load_config([configfile], root=root), series, tempfile.mkdtemp())
    overrides += mlflow_overrides("sqlite:////tmp/unused.db", "run-id")
    config_dir = Path(__import__("verl").__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    print("verl driver: config composed", flush=True)
    run_ppo(config, task_runner_class=PrintingTaskRunner)
    print("verl driver: done", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
