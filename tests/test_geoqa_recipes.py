"""The GeoQA recipe overlays (config/geoqa_r1v.yaml, config/geoqa_mc.yaml) and what they need: the prompts whose tags
their rewards read, the seed-42 test subset, the GeoQA hub layouts read from a local folder by the hub's code path,
the recipe scorers' format rate and accuracy among well-formed answers, per-series train keys and the LoRA options;
then each overlay's CPU variant end to end on geometry diagrams chartrl renders itself (tests/fixtures/geometry).
The embedded default is untouched: its tokenizer corpus (hence its tiny model and every result) keeps the digest it
had before the recipe templates were added."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from chartrl import prompts
from chartrl.answers import extract_choice
from chartrl.config import ConfigError, load_config
from chartrl.data.geometry import FIXTURES, write_geometry
from chartrl.data.geoqa import subsample_indices
from chartrl.rewards import RewardInput, get_scorer
from chartrl.rewards.definitions.r1v import R1V_FORMAT, r1v_format

from conftest import REPO, dataset_from, snakemake

DEFAULT_CORPUS_SHA256 = "05835d840d650ff0645b8af4b88a2257a9468af26443f6e64245cbacb5df931b"
"""sha256 of the embedded default's tokenizer corpus, computed on the code before the recipe templates existed."""
GEOMETRY = REPO / "tests" / "fixtures" / "geometry"
R1V_CPU = ("--configfile", *(str(REPO / "config" / f) for f in ("geoqa_r1v.yaml", "smoke.yaml", "geoqa_r1v_cpu.yaml")))
MC_CPU = ("--configfile", *(str(REPO / "config" / f) for f in ("geoqa_mc.yaml", "smoke.yaml", "geoqa_mc_cpu.yaml")))


def test_the_default_tokenizer_corpus_is_unchanged_by_the_recipe_templates():
    from chartrl.model.tokenizer import corpus

    config = load_config(root=REPO)
    text = "\n".join(corpus(config.model.tiny.seed, config.tools.names))
    assert "<think>" not in text and "boxed" not in text
    assert hashlib.sha256(text.encode()).hexdigest() == DEFAULT_CORPUS_SHA256


def test_the_r1v_prompt_asks_for_exactly_what_the_r1v_format_check_matches():
    rendered = prompts.render("r1v", question="Find the angle.")
    example = re.search(r"i\.e\., (<think>.*?</answer>)", rendered).group(1)  # the form the prompt spells out
    assert r1v_format(example) == 1.0 and R1V_FORMAT.fullmatch(example)
    demonstrated = prompts.reply("r1v", "70")  # what the warm start teaches for this prompt
    assert r1v_format(demonstrated) == 1.0 and R1V_FORMAT.fullmatch(demonstrated)
    for wrong in ("<answer>70</answer>", f"{example} extra", f"Sure. {example}", "<think>70</think>"):
        assert r1v_format(wrong) == 0.0 and not R1V_FORMAT.fullmatch(wrong)


def test_the_multiple_choice_prompt_and_scorer_read_the_letter_of_the_last_box():
    rendered = prompts.render("multiple_choice", question="Which?\nChoices:\nA. 1\nB. 2")
    assert extract_choice(re.search(r"\\boxed\{.\}", rendered).group(0)) == "A"
    assert extract_choice(prompts.reply("multiple_choice", "C")) == "C"
    items = [
        RewardInput(response=r"first \boxed{A}, finally \boxed{C}", ground_truth="C", id="last-box-right"),
        RewardInput(response=r"\boxed{C} then \boxed{42}", ground_truth="C", id="last-box-no-letter"),
        RewardInput(response=r"\boxed{B}", ground_truth="C", id="wrong"),
        RewardInput(response="C", ground_truth="C", id="no-box"),
    ]
    result = get_scorer("multiple_choice")(items)
    verdicts = {i["id"]: (i["answer"], i["accuracy"], i["format"]) for i in result["items"]}
    assert verdicts == {
        "last-box-right": ("C", 1.0, 1.0),
        "last-box-no-letter": (None, 0.0, 0.0),
        "wrong": ("B", 0.0, 1.0),
        "no-box": (None, 0.0, 0.0),
    }
    aggregate = result["aggregate"]
    assert aggregate["format_rate"] == 0.5 and aggregate["well_formed"] == 2
    assert aggregate["accuracy"] == 0.25 and aggregate["accuracy_well_formed"] == 0.5


def test_the_r1v_scorer_reports_format_rate_and_accuracy_among_well_formed_answers():
    items = [
        RewardInput(response="<think>x</think> <answer>70</answer>", ground_truth="70"),
        RewardInput(response="<think>x</think><answer>60</answer>", ground_truth="70"),
        RewardInput(response="<answer>70</answer>", ground_truth="70"),  # right, not in the format
    ]
    aggregate = get_scorer("r1v")(items)["aggregate"]
    assert aggregate["format_rate"] == pytest.approx(2 / 3) and aggregate["well_formed"] == 2
    assert aggregate["accuracy"] == pytest.approx(2 / 3) and aggregate["accuracy_well_formed"] == 0.5


def test_the_subsample_is_the_one_hugging_face_draws_with_seed_42():
    import datasets

    shuffled = datasets.Dataset.from_dict({"i": list(range(759))}).shuffle(seed=42)
    first, last = shuffled.select(range(100))["i"], shuffled.select(range(659, 759))["i"]
    assert subsample_indices(759, 100, 42) == list(first) == subsample_indices(759, 100, 42, take="first")
    assert subsample_indices(759, 100, 42, take="last") == list(last)  # the multiple-choice recipe's test subset
    assert subsample_indices(759, 100, 43) != list(first)
    with pytest.raises(ValueError, match="choose one of first, last"):
        subsample_indices(759, 100, 42, take="middle")


def test_the_geometry_fixtures_are_what_the_generator_writes(tmp_path):
    for layout, sizes in FIXTURES.items():
        for split, path in write_geometry(tmp_path / layout, layout, sizes).items():
            assert path.read_bytes() == (GEOMETRY / layout / path.relative_to(tmp_path / layout)).read_bytes(), split


def _rows(section, split):
    from chartrl.data.sources import source_of

    dataset = dataset_from(section)
    return list(source_of(dataset).read(dataset, split, root=REPO))


def test_both_layouts_read_the_same_from_a_hub_folder_and_from_files():
    """``path`` (datasets.load_dataset, the hub's code path) and ``files`` (one parquet per split) give the same
    rows; mc images are composited from RGBA on white; the subsample keeps the seed-42 rows in their order."""
    from PIL import Image

    from chartrl.data.contract import Row

    hub_r1v = {"source": "geoqa_r1v", "path": "tests/fixtures/geometry/r1v", "splits": {"test": "test"}}
    files_r1v = {
        "source": "geoqa_r1v",
        "files": {"test": "tests/fixtures/geometry/r1v/data/test-00000-of-00001.parquet"},
    }
    hub, files = _rows(hub_r1v, "test"), _rows(files_r1v, "test")
    assert all(isinstance(r, Row) for r in hub) and len(hub) == FIXTURES["r1v"]["test"]
    assert [(r.id, r.problem, r.answer, r.images) for r in hub] == [
        (r.id, r.problem, r.answer, r.images) for r in files
    ]
    assert all(r.chart_type == "geometry" and r.answer.isdigit() for r in hub)

    sample = {"test": {"size": 12, "seed": 42}}
    mc = _rows(
        {"source": "geoqa_mc", "path": "tests/fixtures/geometry/mc", "splits": {"test": "test"}, "subsample": sample},
        "test",
    )
    assert [r.id for r in mc] == [f"test-{i:06d}" for i in subsample_indices(FIXTURES["mc"]["test"], 12, 42)]
    sample["test"]["take"] = "last"  # the multiple-choice recipe's end of the shuffle
    last = _rows(
        {"source": "geoqa_mc", "path": "tests/fixtures/geometry/mc", "splits": {"test": "test"}, "subsample": sample},
        "test",
    )
    assert [r.id for r in last] == [f"test-{i:06d}" for i in subsample_indices(FIXTURES["mc"]["test"], 12, 42, "last")]
    assert {r.id for r in last}.isdisjoint(r.id for r in mc)  # 24 of the fixture's 40: the two ends do not meet
    assert all(r.answer in "ABCD" and "Choices:\nA. " in r.problem for r in mc)
    import io

    image = Image.open(io.BytesIO(mc[0].images[0]))
    assert image.mode == "RGB" and image.getpixel((0, 0)) == (255, 255, 255)  # transparent corner -> white


def test_a_series_sets_its_own_train_keys_and_run_series_names_only_known_series(tmp_path):
    config = load_config([REPO / "config" / "geoqa_r1v.yaml"], root=REPO)
    assert [s.id for s in config.train_series] == ["g1", "g2"] and "e1" not in config.series
    full, lora = config.train_of("g1"), config.train_of("g2")
    assert not full.lora.enabled and full.lr == 1e-6
    assert lora.lr == 1e-5 and lora.lora.enabled and (lora.lora.r, lora.lora.alpha) == (16, 64)
    assert lora.lora.targets == "all-linear" and lora.lora.exclude_modules == ".*visual.*"
    assert lora.lora.freeze_vision_tower and lora.prompts_per_step == 512  # the rest from train:
    bad = tmp_path / "bad.yaml"
    bad.write_text("run_series: [g1, g9]\n")
    with pytest.raises(ConfigError, match=r"run_series\[1\].*'g9' names no series"):
        load_config([REPO / "config" / "geoqa_r1v.yaml", bad], root=REPO)


def test_the_mc_overlay_follows_the_recipe():
    """The recipe's test subset is the last 100 of GeoQA's 759 test questions shuffled with seed 42; Qwen3.5's
    chat template runs with enable_thinking=False; A = r - mean; a checkpoint every 25 steps; one update per step
    (so verl's PPO-clip is the recipe's plain importance-sampling loss: the ratio is 1)."""
    config = load_config([REPO / "config" / "geoqa_mc.yaml"], root=REPO)
    options = config.datasets["geoqa_mc"].options
    assert options["subsample"]["test"] == {"size": 100, "seed": 42, "take": "last"}
    assert options["path"] == "hz2475/geoQA" and config.series["m1"].algorithm == "grpo_mean"
    assert (config.train.steps, config.train.prompts_per_step, config.rollout.n) == (100, 8, 8)
    assert config.train.checkpoint_every == 25 and dict(config.verl.chat_template_kwargs) == {"enable_thinking": False}
    assert config.verl.ppo_mini_batch_size == config.train.prompts_per_step and config.train.ppo_epochs == 1
    assert config.prompts.no_tool_template == "multiple_choice"
    assert not config.train.exclude_degenerate  # verl cannot skip such groups: said beside the key
    cpu = load_config([REPO / "config" / f for f in ("geoqa_mc.yaml", "smoke.yaml", "geoqa_mc_cpu.yaml")], root=REPO)
    assert cpu.train.exclude_degenerate and cpu.datasets["geoqa_mc"].options["subsample"]["test"]["take"] == "last"


# --------------------------------------------------------------------------------------------------------------
# The CPU variants, end to end
# --------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def r1v_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("geoqa-r1v")
    snakemake(workdir, "--cores", "2", *R1V_CPU, timeout=1200)
    return workdir


@pytest.fixture(scope="module")
def mc_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("geoqa-mc")
    snakemake(workdir, "--cores", "2", *MC_CPU, timeout=1200)
    return workdir


def _steps(workdir, sid):
    return [json.loads(line) for line in (workdir / f"results/runs/{sid}/metrics.jsonl").read_text().splitlines()]


def _report(workdir):
    from chartrl.report.panels import panel_problems

    assert panel_problems(workdir / "results/report") == []
    return json.loads((workdir / "results/report/metrics.json").read_text())


@pytest.mark.slow
def test_r1v_cpu_variant_reports_format_and_accuracy_before_and_after(r1v_run):
    metrics = _report(r1v_run)
    recipes = metrics["recipes"]["series"]
    assert set(recipes) == {"g1_start", "g1_last", "g2_last"}
    for sid, entry in recipes.items():
        assert entry["scorer"] == "r1v" and entry["n"] == FIXTURES["r1v"]["test"], sid
        assert 0 <= entry["format_rate"]["mean"] <= 1 and entry["accuracy"]["low"] <= entry["accuracy"]["mean"]
    assert recipes["g1_start"]["checkpoint"] == "start" and recipes["g1_last"]["checkpoint"] == "last"
    for sid in ("g1", "g2"):  # the reward's own parts, and validation by the reward
        steps = _steps(r1v_run, sid)
        assert all("reward/format" in m for m in steps if "reward/overall" in m)
        assert any("val/reward_format" in m for m in steps)
    from safetensors import safe_open

    step = next((r1v_run / "results/runs/g2/checkpoints").glob("step_*"))
    adapter = json.loads((step / "adapter_config.json").read_text())
    assert adapter["exclude_modules"] == ".*visual.*" and (adapter["r"], adapter["lora_alpha"]) == (16, 64)
    with safe_open(str(step / "adapter_model.safetensors"), "pt") as weights:
        adapted = list(weights.keys())
    assert adapted and not [k for k in adapted if "visual" in k]  # every linear layer but the vision tower's
    assert {"q_proj", "down_proj"} <= {k.split(".")[-3] for k in adapted}
    assert not list((r1v_run / "results/runs/g1/checkpoints").glob("step_*/adapter_config.json"))  # g1 full-parameter
    assert "geoqa_r1v" in (r1v_run / "results/report/index.html").read_text()


@pytest.mark.slow
def test_mc_cpu_variant_tests_the_seed_42_subset_and_counts_the_degenerate_groups_it_skips(mc_run):
    from chartrl.data.contract import read_split

    test_ids = [r.id for r in read_split(mc_run / "results/data/geoqa_mc/test.parquet")]
    assert test_ids == [f"test-{i:06d}" for i in subsample_indices(FIXTURES["mc"]["test"], 12, 42, take="last")]
    steps = [m for m in _steps(mc_run, "m1") if "train/degenerate_fraction" in m]
    groups = 4  # prompts_per_step of the CPU variant
    degenerate = sum(round(m["train/degenerate_fraction"] * groups) for m in steps)
    for m in steps:  # a degenerate group's rollouts are left out of the update: 4 rollouts (rollout.n) per group
        assert m["train/updated_sequences"] == (groups - round(m["train/degenerate_fraction"] * groups)) * 4
        assert (m.get("actor/skipped") == 1.0) == (m["train/degenerate_fraction"] == 1.0)
    metrics = _report(mc_run)
    counted = metrics["recipes"]["degenerate"]["m1"]
    assert counted["degenerate"] == degenerate and counted["groups"] == groups * len(steps)
    assert counted["skipped_updates"] == sum(1 for m in steps if m["train/degenerate_fraction"] == 1.0)
    recipes = metrics["recipes"]["series"]
    assert (
        recipes["m1_start"]["reference"]["accuracy"] == 0.71 and recipes["m1_last"]["reference"]["format_rate"] == 0.91
    )
    assert all(entry["n"] == 12 for entry in recipes.values())
