"""The torch threads of a job: its config's ``threads``, at most ``CHARTRL_MAX_THREADS`` when that is set.

The tiny model's operations are small: on a two-core machine two jobs of two threads each, side by side, run several
times slower than two jobs of one thread (their OpenMP threads wait on each other), while one job alone gains little
from its second thread. Whoever runs several DAGs or test workers on one machine sets the cap once for all their
jobs (``make test`` does, for its two workers); a run alone leaves it unset and gets its config's threads.
"""

from __future__ import annotations

import os

ENV = "CHARTRL_MAX_THREADS"


def job_threads(threads: int) -> int:
    """``threads``, capped by ``CHARTRL_MAX_THREADS`` when it is set to a positive number."""
    cap = os.environ.get(ENV, "").strip()
    if not cap:
        return threads
    if not cap.isdigit() or int(cap) < 1:
        raise ValueError(f"{ENV}={cap!r}: set it to a positive whole number of threads, or unset it")
    return min(threads, int(cap))


def use_threads(threads: int) -> int:
    """Set torch's intra-op threads to :func:`job_threads` of ``threads``; returns the number set."""
    import torch

    n = job_threads(threads)
    torch.set_num_threads(n)
    return n
