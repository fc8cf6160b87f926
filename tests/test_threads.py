"""chartrl.threads: a job's torch threads are its config's, capped by CHARTRL_MAX_THREADS when that is set."""

from __future__ import annotations

import pytest

from chartrl.threads import ENV, job_threads, use_threads


def test_without_a_cap_a_job_takes_its_configs_threads(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert job_threads(2) == 2 and job_threads(1) == 1


def test_the_cap_lowers_and_never_raises(monkeypatch):
    monkeypatch.setenv(ENV, "1")
    assert job_threads(2) == 1 and job_threads(1) == 1
    monkeypatch.setenv(ENV, "4")
    assert job_threads(2) == 2


def test_use_threads_sets_torchs_threads(monkeypatch):
    import torch

    before = torch.get_num_threads()
    try:
        monkeypatch.setenv(ENV, "1")
        assert use_threads(2) == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("cap", ["0", "two", "-1"])
def test_a_cap_that_is_not_a_positive_number_is_refused_naming_the_variable(monkeypatch, cap):
    monkeypatch.setenv(ENV, cap)
    with pytest.raises(ValueError, match=f"{ENV}=.*positive whole number"):
        job_threads(2)
