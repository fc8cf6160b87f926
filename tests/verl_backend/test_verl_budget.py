"""The plan's budget before booking: time, disk and judge calls against hand-computed figures for config/gpu.yaml;
a plan that cannot fit its GPUs refused by `chartrl config check`, `chartrl plan` and the config loader alike,
naming the key to change; and every shipped GPU overlay accepted by both commands."""

from __future__ import annotations

import pytest

from chartrl.cli import main
from chartrl.config import ConfigError, load_config
from chartrl.verl_backend.architectures import KNOWN_ARCHITECTURES
from chartrl.verl_backend import gpu_hours
from chartrl.verl_backend.budget import (
    Assumptions,
    checkpoint_bytes,
    kept_checkpoints,
    logits_path,
    plan_budget,
    saved_steps,
    train_judge_calls,
    validations,
)

from conftest import REPO

CONFIG = REPO / "config"
P = 3_754_622_976  # Qwen2.5-VL-3B-Instruct's parameters


@pytest.mark.parametrize(
    "steps, every, before, expected",
    [
        (220, 5, True, 45),  # the study: steps 5, 10, ..., 220 and once before training
        (4, 2, True, 3),  # the smoke run: before, 2, 4
        (80, 80, False, 1),  # DeepEyes: the last step only
        (7, 5, False, 2),  # step 5 and the last step, 7
    ],
)
def test_validations_as_verl_counts_them(steps, every, before, expected):
    assert validations(steps, every, before) == expected


@pytest.mark.parametrize(
    "steps, every, keep, named, kept",
    [
        (220, 5, 3, (65,), 4),  # e1: 210, 215, 220 and the step e4 names
        (220, 5, 3, (215,), 3),  # e2: the named step is among the newest three
        (220, 5, 3, (), 3),  # e3: no eval series names it
        (4, 2, 1, (2,), 2),  # the smoke run: step 4 and the named step 2
    ],
)
def test_kept_checkpoints(steps, every, keep, named, kept):
    assert kept_checkpoints(steps, every, keep, named) == kept


def test_a_checkpoint_is_fp32_weights_and_adamw_states():
    arch = KNOWN_ARCHITECTURES["Qwen/Qwen2.5-VL-3B-Instruct"]
    assert checkpoint_bytes(arch, 0) == 12 * P  # 45.1 GB: the "~45 GB per checkpoint"
    assert round(checkpoint_bytes(arch, 0) / 1e9, 1) == 45.1
    assert checkpoint_bytes(arch, 1000) == 4 * (P + 1000) + 8 * 1000  # LoRA: the base weights, the adapters' moments
    assert len(saved_steps(220, 5)) == 44  # saved over a series; all but the kept ones are deleted as it goes


@pytest.mark.parametrize(
    "members, expected",
    [
        (1, 585_700),  # e2: 220 steps x 512 prompts x 5 samples + 45 validations x 500 questions (the issue: ~0.56 M)
        (3, 1_757_100),  # e12: the same for each of the panel's 3 members (the issue: ~1.7 M)
        (0, 0),  # a rule reward calls no judge
    ],
)
def test_judge_calls_of_a_train_series(members, expected):
    assert train_judge_calls(members, 220, 512, 5, 45, 500) == expected


@pytest.fixture(scope="module")
def study_plan(gpu_config):
    return {job.job: job for job in plan_budget(gpu_config)}


def test_the_studys_jobs(study_plan):
    assert list(study_plan) == [
        "shortcut answers chartqa",
        *(f"train {s}" for s in ("e1", "e2", "e3", "e6", "e7", "e10", "e11", "e12")),
        "generate e4 (e1 @ 65)", "generate e5 (e2 @ 215)", "generate e8 (e6 @ 80)", "generate e13 (e10 @ 215)",
    ]  # fmt: skip


def test_the_studys_judge_calls(study_plan):
    calls = {name: job.judge_calls for name, job in study_plan.items() if job.judge_calls}
    # each evaluated checkpoint's 2,500 test answers graded by the judge and the panel's 3 members
    assert calls == {"train e2": 585_700, "train e12": 1_757_100, **{n: 10_000 for n in study_plan if "generate" in n}}


def test_the_studys_time_by_hand(study_plan):
    e1 = study_plan["train e1"].gpu_hours
    rollouts, val = 220 * 512 * 5, 45 * 500
    # central: e1's trajectory is 1,536 prompt (968 text + 568 chart), 512 decoded (2 passes x half of 512) and 632
    # observed tokens (the edited chart 568 + 64); its update runs on the padded path, every micro-batch at the high
    # estimate's 3,900 tokens: 6 forwards (old, reference, update forward, backward x 2, recomputation)
    rates = gpu_hours.RATES["central"]
    rollout = (1536 + 632) / 20_000 + 512 / 1_500
    training = 3900 * 6 * 2 * P / (989e12 * 0.08)
    assert (rates.prefill_tokens_per_second, rates.decode_tokens_per_second) == (20_000, 1_500)
    assert e1.central == pytest.approx(((rollouts + val) * rollout + rollouts * training) / 3600)
    assert round(e1.central) == 421 and e1.low < e1.central / 3 and e1.high > 2 * e1.central
    assert study_plan["train e3"].gpu_hours.central < e1.central / 2  # one pass, no tool turn, a short prompt


def test_the_time_from_the_smoke_runs_figures(gpu_config):
    rollouts, val = 220 * 512 * 5, 45 * 500
    measured = plan_budget(gpu_config, Assumptions(tokens_per_gpu_second=1500, fill=0.5))
    e1 = next(job for job in measured if job.job == "train e1").gpu_hours
    assert e1.central == pytest.approx((rollouts + val) * 5184 * 0.5 / 1500 / 3600)  # 5,184: 2,048 + 3,136
    assert (e1.low, e1.high) == pytest.approx((0.8 * e1.central, 1.5 * e1.central))


def test_the_studys_disk(study_plan):
    assert study_plan["train e1"].disk_bytes == 4 * 12 * P  # 180 GB
    assert study_plan["train e3"].disk_bytes == 3 * 12 * P
    assert study_plan["train e1"].disk_peak_bytes == 5 * 12 * P  # one more while the next is written, resumed or not
    assert study_plan["generate e4 (e1 @ 65)"].disk_bytes == 2 * P  # the merged bf16 model


def test_the_studys_jobs_fit_80_gb_gpus(study_plan):
    for job in study_plan.values():
        assert max(phase.total for phase in job.phases) <= 80 * 1024**3, job.job


def test_fused_kernels_named_in_an_extra_override_change_the_logits_path(gpu_config, tmp_path):
    assert logits_path(gpu_config) == "padded"
    overlay = tmp_path / "fused.yaml"
    overlay.write_text("verl: {extra_overrides: ['actor_rollout_ref.model.use_fused_kernels=True']}\n")
    assert logits_path(load_config([CONFIG / "gpu.yaml", overlay], root=REPO)) == "fused"


# -- the refusals, through every door ----------------------------------------------------------------------------

REFUSED = {
    # today's log-prob micro-batch on the padded path: the entropy of [16, 5184, 151936] logits
    "log-prob 16": (
        "verl: {log_prob_micro_batch_size_per_gpu: 16}\n",
        ["verl.log_prob_micro_batch_size_per_gpu 16", "set verl.log_prob_micro_batch_size_per_gpu to at most 8"],
    ),
    # the 3B study on one 80 GB GPU without offload
    "one GPU": (
        "verl: {n_gpus_per_node: 1, tensor_model_parallel_size: 1}\n",
        [
            "~101.0 GiB per GPU",
            "set verl.param_offload: true",
            "set verl.optimizer_offload: true",
            "verl.n_gpus_per_node; 1 now",
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_plan_that_cannot_fit_is_refused_by_the_loader(case, tmp_path):
    overlay, expected = REFUSED[case]
    (tmp_path / "o.yaml").write_text(overlay)
    with pytest.raises(ConfigError) as refused:
        load_config([CONFIG / "gpu.yaml", tmp_path / "o.yaml"], root=REPO)
    for text in expected:
        assert text in str(refused.value)


@pytest.mark.parametrize("command", ["config check", "plan"])
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_plan_that_cannot_fit_is_refused_by_both_commands(command, case, tmp_path, capsys):
    overlay, expected = REFUSED[case]
    (tmp_path / "o.yaml").write_text(overlay)
    files = ["--configfile", str(CONFIG / "gpu.yaml"), "--configfile", str(tmp_path / "o.yaml")]
    assert main([*command.split(), *files, "--root", str(REPO)]) == 2
    err = capsys.readouterr().err
    assert all(text in err for text in expected), err


SHIPPED = [["gpu.yaml"], ["gpu.yaml", "gpu_smoke.yaml"], ["deepeyes.yaml"], ["geoqa_mc.yaml"], ["geoqa_r1v.yaml"]]


@pytest.mark.parametrize("overlays", SHIPPED, ids=["+".join(o) for o in SHIPPED])
def test_every_shipped_gpu_overlay_passes_both_commands(overlays, capsys):
    files = [arg for name in overlays for arg in ("--configfile", str(CONFIG / name))]
    assert main(["config", "check", *files, "--root", str(REPO)]) == 0
    assert main(["plan", *files, "--root", str(REPO)]) == 0
    out = capsys.readouterr().out
    assert "config OK" in out and "\ntotal " in out and "peak GiB/GPU" in out


def test_the_plan_says_what_it_assumes(capsys):
    assert main(["plan", "--configfile", str(CONFIG / "gpu.yaml"), "--root", str(REPO)]) == 0
    out = capsys.readouterr().out
    assert "train e12" in out and "1,757,100" in out  # the panel-judged series' calls
    assert "per-token Python loop" in out and "not priced" in out  # the padded path's unmeasured loop
    assert "a resumed run keeps no more (chartrl verl train deletes an earlier attempt's" in out
    assert "outbound internet or a judge server" in out
    assert "1,500 decode tokens per GPU-second" in out and "re-plan with the --fill and --tokens-per-gpu-second" in out
    total = next(line for line in out.splitlines() if line.startswith("total"))
    assert "2,584.5  (820.1-6,519.8)" in total  # the central estimate and the range


def test_the_plan_from_measured_figures_says_so(capsys):
    files = ["--configfile", str(CONFIG / "gpu.yaml"), "--root", str(REPO)]
    assert main(["plan", *files, "--fill", "0.5", "--tokens-per-gpu-second", "1500"]) == 0
    out = capsys.readouterr().out
    assert "from measured figures" in out and "per-token Python loop" not in out  # the throughput includes it
    assert main(["plan", *files, "--fill", "0.5"]) == 2
    assert "--fill needs --tokens-per-gpu-second" in capsys.readouterr().err


def test_the_plan_refuses_a_fill_outside_0_1(capsys):
    assert main(["plan", "--configfile", str(CONFIG / "gpu.yaml"), "--root", str(REPO), "--fill", "1.5"]) == 2
    assert "--fill 1.5" in capsys.readouterr().err


def test_the_plan_takes_overlays_as_snakemake_does(capsys):
    # `--configfile config/gpu.yaml site.yaml`, copied from the snakemake line, reads both files, as the flag
    # repeated does: the plan is the run's plan (here the smoke overlay stands in for a site overlay)
    gpu, smoke = str(CONFIG / "gpu.yaml"), str(CONFIG / "gpu_smoke.yaml")
    assert main(["plan", "--configfile", gpu, smoke, "--root", str(REPO)]) == 0
    one_flag = capsys.readouterr().out
    assert main(["plan", "--configfile", gpu, "--configfile", smoke, "--root", str(REPO)]) == 0
    assert capsys.readouterr().out == one_flag and "4 GPUs of 80 GiB" in one_flag
    assert main(["config", "check", "--configfile", gpu, smoke, "--root", str(REPO), "--show"]) == 0
    assert '"n_gpus_per_node": 4' in capsys.readouterr().out
