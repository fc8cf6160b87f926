"""The supervised warm start: a floor above the rollout and the model, since its demonstrations are built with the
rollout's own token builder and checked with greedy rollouts.

- chartrl.warmstart.supervised   demonstrations from the train split and the supervised training loop
- chartrl.warmstart.check        the after-warm-start check: greedy and sampled rollouts next to their controls
"""

METRICS_FILE = "warmstart_metrics.jsonl"
RUN_FILE = "warmstart_run.json"
"""In the warm-started model's folder: its MLflow run, under which the check's run is nested."""
RUN_RECORDS = (METRICS_FILE, RUN_FILE)
"""Written beside the warm-started weights: the warm start's metrics and its MLflow run. Two warm starts that trained
the same weights write other timings and run ids there, so a train job's key leaves them out of its model's digest
(``chartrl.train.resume``)."""
