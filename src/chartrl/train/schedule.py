"""The learning rate of a training step: verl's own schedule functions, which the verl backend's actor steps with
the same settings, so both backends train at the same rate."""

from __future__ import annotations

from chartrl.config import TrainConfig


def lr_factor(scheduler: str, warmup_steps: int, total_steps: int, min_lr_ratio: float, step: int) -> float:
    """The share of the peak learning rate at update ``step`` (1-based): verl's
    ``get_constant_schedule_with_warmup`` / ``get_cosine_schedule_with_warmup``, which verl's FSDP actor steps
    after every update, so update k runs at the schedule's value for k - 1."""
    import torch
    from verl.utils.torch_functional import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    if scheduler == "cosine":
        schedule = get_cosine_schedule_with_warmup(optimizer, warmup_steps, total_steps, min_lr_ratio=min_lr_ratio)
    else:
        schedule = get_constant_schedule_with_warmup(optimizer, warmup_steps)
    return float(schedule.lr_lambdas[0](step - 1))


def learning_rate(train: TrainConfig, step: int) -> float:
    """The learning rate of update ``step`` (1-based) under ``train``'s schedule."""
    return train.lr * lr_factor(train.lr_scheduler, train.lr_warmup_steps, train.steps, train.min_lr_ratio, step)
