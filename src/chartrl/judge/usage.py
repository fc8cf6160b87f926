"""Judge usage to MLflow: the train and score stages call :func:`log_judge_usage` with their run."""

from __future__ import annotations

from chartrl.judge.base import Judge
from chartrl.tracking import StageRun


def usage_metrics(judge: Judge, prefix: str = "judge") -> dict[str, float]:
    """``judge/<counter>`` for the judge (a panel's totals), plus ``judge/<member>/<counter>`` per panel member."""
    metrics = {f"{prefix}/{name}": float(value) for name, value in judge.usage.as_dict().items()}
    for member in getattr(judge, "members", ()):
        metrics.update({f"{prefix}/{member.name}/{n}": float(v) for n, v in member.usage.as_dict().items()})
    return metrics


def log_judge_usage(run: StageRun, judge: Judge, step: int = 0, prefix: str = "judge") -> dict[str, float]:
    """Log the judge's counters (calls, tokens, cache hits, retries, failures, length rejections) to ``run``."""
    metrics = usage_metrics(judge, prefix)
    run.log_metrics(metrics, step=step)
    return metrics
