"""The user's command is the product: the Snakemake DAG, end to end, in a scratch working directory."""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from chartrl.config import load_config
from chartrl.data.contract import check_box, check_row, read_split, write_split

from conftest import REPO, find_chromium, headless_chromium, reuse_outputs, snakemake
from synth_answers import expected_answer

pytestmark = pytest.mark.slow
SMOKE = str(REPO / "config" / "smoke.yaml")
SMOKE_CONFIG = load_config([SMOKE], root=REPO)
# What the smoke DAG holds, derived from the config's series (config/series.yaml and the overlay), so that a series
# added there is checked like the others: the train series, the train series an eval series reads (their test
# curves), every (eval series, scorer), the checkpoints generated once each (the first eval series naming one), the
# matrix cells no eval series asks for, and the diagonals.
TRAIN_SERIES = tuple(s.id for s in SMOKE_CONFIG.train_series)  # h1: the hack control
TRAIN_JOBS = {("train", f"series={s}") for s in TRAIN_SERIES}
CURVE_SERIES = tuple(sorted({s.of for s in SMOKE_CONFIG.eval_series}))
SCORES = {(s.id, scorer) for s in SMOKE_CONFIG.eval_series for scorer in s.scorers}
CHECKPOINTS: dict[tuple, list] = {}  # one checkpoint's eval series, in config order
for _series in SMOKE_CONFIG.eval_series:
    CHECKPOINTS.setdefault((_series.of, str(_series.checkpoint), _series.dataset, _series.split), []).append(_series)
GENERATING = tuple(group[0].id for group in CHECKPOINTS.values())
MATRIX = {
    (group[0].id, scorer)
    for group in CHECKPOINTS.values()
    for scorer in ("rule", "judge", "panel")
    if scorer not in {c for s in group for c in s.scorers}
}
"""The matrix cells no eval series asks for: each evaluated checkpoint by every scorer (chartrl.evaluate.matrix)."""
DIAGONALS = tuple(
    dict.fromkeys(s.id for group in CHECKPOINTS.values() for s in group for c in s.scorers if c != group[0].scorers[0])
)  # an eval series scoring a checkpoint with another scorer than its first one: the diagonal pair's second
RERANKED = {(s.id, scorer) for s in SMOKE_CONFIG.eval_series if s.rerank for scorer in s.scorers}
EVAL_JOBS = (
    {("generate", f"series={s}") for s in GENERATING}
    | {("score", f"series={s}, scorer={scorer}") for s, scorer in SCORES}
    | {("diagonal", f"series={s}") for s in DIAGONALS}
    | {("matrix_score", f"series={s}, scorer={scorer}") for s, scorer in MATRIX}  # the reward x scorer matrix
    | {("rerank", f"series={s}") for s, _ in RERANKED}  # best-of-N (e4 in config/series.yaml)
    | {("rerank_score", f"series={s}, scorer={scorer}") for s, scorer in RERANKED}
    | {("test_accuracy", f"series={s}") for s in TRAIN_SERIES}  # every train series on test, per question type
    | {("warmstart_test_accuracy", f"mode={m}") for m in ("on", "off")}  # the starting point, tools on and off
    | {("warmstart_check", "")}  # the after-warm-start check of the warm-started model
    | {("test_curve", f"series={s}") for s in CURVE_SERIES}  # every kept checkpoint of what an eval series reads
    | {("report", "")}
)
# the shortcut filter of synthchart's train split (config.yaml sets it; the smoke overlay keeps it): it reads the
# train split and the starting policy, and the report reads its card
FILTER_JOBS = {("shortcut_answers", "dataset=synthchart"), ("shortcut_filter", "dataset=synthchart")}


@pytest.mark.parametrize(
    "overlay",
    [
        [],
        ["--configfile", SMOKE],
        ["--configfile", str(REPO / "config/gpu.yaml")],
        ["--configfile", str(REPO / "config/seeds.yaml")],
    ],
    ids=["default", "smoke", "gpu", "seeds"],
)
def test_dry_run_and_lint_pass_for_every_config(tmp_path, overlay):
    dry = snakemake(tmp_path, "-n", *overlay)
    assert "data_split" in dry.stdout
    curves = {job for job in _planned_jobs(dry.stdout) if job[0] == "test_curve"}
    # the test curve runs on the local backend, for each train series an eval series reads; on verl the report
    # says why not (chartrl.report.testcurves)
    assert curves == (
        set() if "gpu.yaml" in " ".join(overlay) else {("test_curve", f"series={s}") for s in CURVE_SERIES}
    )
    if not overlay:  # step 0 from the warm start's test file, the last checkpoint from the series' own
        block = dry.stdout.split("\nrule test_curve:")[1].split("\nrule ")[0]
        assert "results/eval/warmstart/test_accuracy_tools_on.json" in block
        # (the first test_curve job Snakemake prints: any series with a curve, in no fixed order)
        assert re.search(rf"results/eval/({'|'.join(CURVE_SERIES)})/test_accuracy.json", block)
    lint = snakemake(tmp_path, "--lint", *overlay)
    assert "Congratulations" in lint.stdout + lint.stderr


def test_a_local_config_with_model_path_trains_every_series_from_that_model(tmp_path):
    """model.path on the local backend (a pretrained model in place of the tiny one): each train job's command
    names it, quoted, and no job builds, warm-starts or checks the tiny model."""
    overlay = tmp_path / "model_path.yaml"
    overlay.write_text('model: {path: "models/a pretrained VLM"}\n')
    dry = snakemake(tmp_path, "-n", "-p", "--configfile", SMOKE, str(overlay))
    commands = [line for line in dry.stdout.splitlines() if "chartrl train " in line]
    assert len(commands) == len(TRAIN_SERIES)
    assert all("--model 'models/a pretrained VLM' --train " in command for command in commands), commands[0]
    assert not {rule for rule, _ in _planned_jobs(dry.stdout)} & {"base_model", "warmstart", "warmstart_check"}


def test_the_longest_jobs_go_first_tool_series_then_baselines_then_evaluation(tmp_path):
    """Snakemake runs ready jobs by priority: a tool series' training (two rollout passes) before a baseline's,
    both before every evaluation job, so that a long training never starts last beside an idle core."""
    dry = snakemake(tmp_path, "-n")  # the embedded default: with its extra seeds
    priorities = {}
    for rule, wildcards, block in _job_blocks(dry.stdout):
        priority = re.search(r"priority: (\d+)", block)
        priorities[(rule, wildcards)] = int(priority.group(1) if priority else 0)
    tool_series = {"e1", "e2", "e6", "e10", "e12", "h1"}
    trainings = {job: p for job, p in priorities.items() if job[0] in ("train", "train_seed")}
    seeded = [s.id for s in load_config(root=REPO).seeded_series]
    assert 0 < len(seeded) < len(TRAIN_SERIES)  # the series the hypotheses compare
    assert len(trainings) == len(TRAIN_SERIES) + 2 * len(seeded)  # and their extra seeds' runs
    for (rule, wildcards), priority in trainings.items():
        series = re.search(r"series=(\w+)", wildcards).group(1)
        assert priority == (2 if series in tool_series else 1), (rule, wildcards)
    assert {job: p for job, p in priorities.items() if job not in trainings and p} == {}


def test_one_target_on_the_smoke_config_meets_the_contract(tmp_path):
    # `--configfile` takes several files: name it with `=` (or after the targets) so the target stays a target
    snakemake(tmp_path, "--cores", "2", f"--configfile={SMOKE}", "results/data/synthchart/test.parquet")
    rows = read_split(tmp_path / "results/data/synthchart/test.parquet")
    assert len(rows) == 8 * 2  # 8 charts x 2 questions (config/smoke.yaml)
    for row in rows:
        check_row(row)
        assert row.answer == expected_answer(row)
        for axis in ("x_values", "y_values"):
            for box in row.bboxes[axis].values():
                assert check_box(box) is None
    # only what the target needs ran: no other split, no card
    assert not (tmp_path / "results/data/synthchart/train.parquet").exists()
    assert (tmp_path / "results/logs/data/synthchart/test.log").read_text().count("rendering") >= 1


def test_two_runs_on_different_targets_share_the_local_ray_head(smoke_run, tmp_path):
    """Snakemake's lock lets two runs on different targets work in one folder at once; with launcher: ray both
    submit to the one local head. The run that ends first leaves the head to the other (it does not stop the
    other's job), both finish, and every MLflow run ends FINISHED."""
    ray = [f"--configfile={SMOKE}", "--config=launcher=ray"]  # `=`: each takes several values, targets included
    # what both targets need, there first (two runs must not both plan the same jobs): the smoke run's data and
    # warm-started model with Snakemake's records of them, so that neither run plans their jobs again
    reuse_outputs(smoke_run, tmp_path, ("data", "models", "logs/data", "logs/model"))
    shared = [f"results/data/synthchart/{split}.parquet" for split in ("train", "val", "test")]
    planned = snakemake(tmp_path, "-n", f"--configfile={SMOKE}", "results/models/base", *shared)
    assert "Nothing to be done" in planned.stdout + planned.stderr, planned.stdout
    train_log = tmp_path / "results/logs/train/e3.log"
    with ThreadPoolExecutor(1) as pool:
        training = pool.submit(snakemake, tmp_path, "--cores", "1", *ray, "results/runs/e3/run.json")
        deadline = time.time() + 300
        while "submitting chartrl-train-e3" not in (train_log.read_text() if train_log.exists() else ""):
            assert time.time() < deadline and not training.done(), "the training run never submitted its job"
            time.sleep(0.5)
        testing = snakemake(tmp_path, "--cores", "1", *ray, "results/eval/warmstart/test_accuracy_tools_on.json")
        trained = training.result()
    outputs = [testing.stdout + testing.stderr, trained.stdout + trained.stderr]
    assert sum("left running: the workflow runs" in out for out in outputs) == 1, outputs
    assert sum(re.search(r"local Ray head \S+ stopped", out) is not None for out in outputs) == 1
    assert (tmp_path / "results/runs/e3/run.json").is_file()

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/results/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("chartrl-smoke").experiment_id])
    assert {"e3/train", "warmstart/test/tools_on"} <= {r.info.run_name for r in runs}
    assert {r.info.run_name: r.info.status for r in runs if r.info.status != "FINISHED"} == {}


def _job_blocks(stdout: str):
    """(rule, wildcards, text) of each job a dry run would execute."""
    for block in stdout.split("\nrule ")[1:]:
        rule = block.split(":", 1)[0].strip()
        match = re.search(r"wildcards: ([^\n]+)", block)
        yield rule, match.group(1).strip() if match else "", block


def _planned_jobs(stdout: str) -> set[tuple[str, str]]:
    """(rule, wildcards) of the jobs a dry run would execute."""
    return {(rule, wildcards) for rule, wildcards, _ in _job_blocks(stdout)}


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("smoke")
    snakemake(workdir, "--cores", "2", "--configfile", SMOKE)
    return workdir


def test_the_smoke_jobs_ran_in_forks_of_a_preloaded_server(smoke_run):
    """The workflow turns the forkserver on for its jobs (chartrl.forkserver): all but the few that started a
    server (the first job of each environment: the tiny model's among them) ran in a fork of it, every other
    stage among them."""
    logs = Path(os.environ["CHARTRL_FORKSERVER_DIR"]).glob("*.log")
    served = [line for log in logs for line in log.read_text().splitlines() if f" in {smoke_run}: " in line]
    stages = {line.rsplit("chartrl ", 1)[1] for line in served}
    assert {"data", "warmstart", "warmstart-check", "launch", "train", "test-accuracy", "score", "diagonal"} <= stages
    assert "report" in stages
    jobs = len(list((smoke_run / "results/benchmarks").rglob("*.tsv")))
    assert len([line for line in served if not line.endswith("chartrl launch")]) >= jobs - 3


def test_smoke_run_builds_every_dataset_with_its_card_and_mlflow_run(smoke_run):
    cards = {
        name: json.loads((smoke_run / f"results/data/{name}/card.json").read_text())
        for name in ("synthchart", "chartqa_sample")
    }
    assert set(cards["synthchart"]["splits"]) == {"train", "val", "test"}
    assert cards["synthchart"]["charts_shared_across_splits"] == 0
    assert cards["synthchart"]["splits"]["train"]["rows"] == 24 * 2
    assert cards["chartqa_sample"]["splits"]["test"]["rows"] == 124
    assert cards["chartqa_sample"]["splits"]["test"]["bbox_coverage"]["bar_charts_with_boxes"] == 30
    assert (smoke_run / "results/data/synthchart/samples.png").stat().st_size > 10_000
    check = json.loads((smoke_run / "results/models/warmstart_check.json").read_text())
    assert check["rows"] == 6 and set(check) >= {
        f"{decoding}/{prompt}{control}"
        for decoding in ("sampled", "greedy")
        for prompt in ("with_tools", "no_tool")
        for control in ("", "_shuffled_images")
    }
    assert (smoke_run / "results/models/warmstart_gallery.png").stat().st_size > 10_000

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_run}/results/mlflow.db")
    experiment = client.get_experiment_by_name("chartrl-smoke")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    evaluation = {f"{s}/generate" for s in GENERATING} | {f"{s}/score/{c}" for s, c in SCORES}
    evaluation |= {f"{s}/diagonal" for s in DIAGONALS} | {"report"}
    evaluation |= {f"{s}/rerank" for s, _ in RERANKED} | {f"{s}/rerank/{c}" for s, c in RERANKED}
    evaluation |= {f"{s}/matrix/{c}" for s, c in MATRIX}
    evaluation |= {"synthchart/shortcut_filter"}
    evaluation |= {f"{s}/test_curve" for s in CURVE_SERIES}  # the test curve of every series an eval series reads
    # per-type test accuracy of every train series and of the warm-started start, tools on and off
    evaluation |= {f"{s}/test" for s in TRAIN_SERIES} | {f"warmstart/test/tools_{m}" for m in ("on", "off")}
    expected = {"synthchart/data", "chartqa_sample/data", "base/warmstart", "base/warmstart_check"}
    expected |= {f"{s}/train" for s in TRAIN_SERIES}
    assert set(runs) == expected | evaluation
    e10 = runs["e10/train"].data
    assert e10.tags["algorithm"] == "drgrpo" and e10.tags["reward"] == "v3_gra" and e10.tags["tools"] == "true"
    assert e10.params["series.algorithm"] == "drgrpo" and "reward/overall" in e10.metrics
    # its splits as dataset inputs and its series' headline test figures, so the train runs compare on test
    inputs = runs["e10/train"].inputs.dataset_inputs
    contexts = {t.value for i in inputs for t in i.tags if t.key == "mlflow.data.context"}
    assert contexts == {"train", "validation", "test"} and "test/accuracy" in e10.metrics
    for series in TRAIN_SERIES:
        run = json.loads((smoke_run / f"results/runs/{series}/run.json").read_text())
        assert run["last_step"] == 4 and (smoke_run / run["checkpoints"]["last"]).is_dir()  # relative to the workdir
        steps = [
            json.loads(line) for line in (smoke_run / f"results/runs/{series}/metrics.jsonl").read_text().splitlines()
        ]
        assert [metrics["step"] for metrics in steps] == [0, 1, 2, 3, 4]
        # the smoke DAG trains for real: at least one step of every series has a group whose rewards differ
        assert "actor/loss" in runs[f"{series}/train"].data.metrics, f"{series}: no policy update in 4 steps"
        assert sum("actor/loss" in metrics for metrics in steps) >= 1
    # e2's reward is the judge's verdict: the policy wrote answers and the judge judged them (the reference judge
    # of the smoke config counts verdicts; an OpenAI-compatible one also counts its requests)
    e2 = [json.loads(line) for line in (smoke_run / "results/runs/e2/metrics.jsonl").read_text().splitlines()]
    assert sum(metrics.get("judge/verdicts", 0) for metrics in e2) >= 1
    warm, check = runs["base/warmstart"], runs["base/warmstart_check"]
    assert warm.data.params["warmstart.steps"] == "80" and "rollout.max_new_tokens" not in warm.data.params
    assert len(client.get_metric_history(warm.info.run_id, "warmstart/loss")) == 80
    # the check: its own run, nested under the warm start's, with the rollout settings it sampled with
    assert check.data.tags["mlflow.parentRunId"] == warm.info.run_id and check.data.params["rollout.max_new_tokens"]
    assert "after_warmstart/sampled/with_tools/answer_rate" in check.data.metrics
    run = runs["synthchart/data"]
    assert run.data.tags["stage"] == "data" and run.data.params["options.splits.train"] == "24"
    assert run.data.metrics["train/rows"] == 48
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"card.json", "samples.png"}


def test_nothing_to_do_after_a_complete_run(smoke_run):
    dry = snakemake(smoke_run, "-n", "--configfile", SMOKE)
    assert _planned_jobs(dry.stdout) == set()


def test_a_change_to_one_dataset_reruns_only_its_jobs(smoke_run, tmp_path):
    reseed = tmp_path / "reseed.yaml"
    reseed.write_text("datasets:\n  synthchart:\n    seed: 1\n")
    jobs = _planned_jobs(snakemake(smoke_run, "-n", "--configfile", SMOKE, str(reseed)).stdout)
    assert (
        jobs
        == {
            ("data_split", "dataset=synthchart, split=train"),
            ("data_split", "dataset=synthchart, split=val"),
            ("data_split", "dataset=synthchart, split=test"),
            ("data_card", "dataset=synthchart"),
            ("warmstart", ""),  # trained on synthchart's train split
            ("all", ""),
        }
        | TRAIN_JOBS
        | EVAL_JOBS  # everything downstream: evaluation and the report
        | FILTER_JOBS
    )
    # growing the train split reruns only the train split (and the card): test and val do not depend on it
    grow = tmp_path / "grow.yaml"
    grow.write_text("datasets:\n  synthchart:\n    splits: {train: 30, val: 6, test: 8}\n")
    jobs = _planned_jobs(snakemake(smoke_run, "-n", "--configfile", SMOKE, str(grow)).stdout)
    assert (
        jobs
        == {
            ("data_split", "dataset=synthchart, split=train"),
            ("data_card", "dataset=synthchart"),
            ("warmstart", ""),
            ("all", ""),
        }
        | TRAIN_JOBS
        | EVAL_JOBS  # everything downstream: evaluation and the report
        | FILTER_JOBS
    )
    # a warm-start setting reruns the warm start and what follows; a tiny-model size also rebuilds the model
    steps = tmp_path / "steps.yaml"
    steps.write_text("warmstart:\n  steps: 9\n")
    assert (
        _planned_jobs(snakemake(smoke_run, "-n", "--configfile", SMOKE, str(steps)).stdout)
        == {
            ("warmstart", ""),
            ("all", ""),
        }
        | TRAIN_JOBS
        | EVAL_JOBS  # everything downstream: evaluation and the report
        | FILTER_JOBS
    )
    size = tmp_path / "size.yaml"
    size.write_text("model:\n  tiny:\n    hidden_size: 64\n")
    assert (
        _planned_jobs(snakemake(smoke_run, "-n", "--configfile", SMOKE, str(size)).stdout)
        == {
            ("base_model", ""),
            ("warmstart", ""),
            ("all", ""),
        }
        | TRAIN_JOBS
        | EVAL_JOBS  # everything downstream: evaluation and the report
        | FILTER_JOBS
    )
    # one series' reward parameter retrains that series only
    reward = tmp_path / "reward.yaml"
    reward.write_text("series:\n  e6:\n    reward: {name: v2_shaped, d_length: 0.3}\n")
    assert _planned_jobs(snakemake(smoke_run, "-n", "--configfile", SMOKE, str(reward)).stdout) == {
        ("train", "series=e6"),
        ("test_accuracy", "series=e6"),
        ("test_curve", "series=e6"),
        ("generate", "series=e8"),  # e6's checkpoint, read by e8 and e9
        ("score", "series=e8, scorer=rule"),
        ("score", "series=e9, scorer=judge"),
        ("matrix_score", "series=e8, scorer=panel"),  # the matrix's cell of e6's checkpoint no series asks for
        ("diagonal", "series=e9"),
        ("report", ""),
        ("all", ""),
    }


def test_a_newer_val_split_reruns_the_check_and_not_the_warm_start(smoke_run, tmp_path):
    """The warm start reads the val split only to refuse one too small for its check (an ancient input,
    rules/model.smk): a val split rewritten after the model reruns the check, not minutes of warm-start training."""
    reuse_outputs(smoke_run, tmp_path, ("data", "models", "logs/data", "logs/model"))
    val = tmp_path / "results/data/synthchart/val.parquet"
    write_split(read_split(val)[::-1], val)  # new bytes: Snakemake compares a small file's checksum, not only its time
    dry = snakemake(tmp_path, "-n", f"--configfile={SMOKE}", "results/models/warmstart_check.json")
    assert _planned_jobs(dry.stdout) == {("warmstart_check", "")}


@pytest.mark.parametrize(
    "overlay,fragments",
    [
        ("series:\n  e10:\n    algorithm: dr_grpo\n", ["dr_grpo", "drgrpo", "algorithm"]),
        ("series:\n  e13:\n    of: e99\n", ["series.e13.of", "e99", "names no train series"]),
    ],
    ids=["schema", "cross-reference"],
)
def test_invalid_config_stops_snakemake_before_anything_runs(tmp_path, overlay, fragments):
    bad = tmp_path / "bad.yaml"
    bad.write_text(overlay)
    result = snakemake(tmp_path, "-n", "--configfile", str(bad), check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    for fragment in fragments:
        assert fragment in output, output[-3000:]
    assert not (tmp_path / "results").exists()


def test_evaluation_shares_generations_and_checks_the_diagonal(smoke_run):
    # e8 and e9 score the very same generations file (e6's checkpoint); e9 has none of its own
    e8 = json.loads((smoke_run / "results/eval/e8/scores_rule.json").read_text())
    e9 = json.loads((smoke_run / "results/eval/e9/scores_judge.json").read_text())
    assert e8["aggregate"]["generations"] == e9["aggregate"]["generations"] == "results/eval/e8/generations.parquet"
    assert not (smoke_run / "results/eval/e9/generations.parquet").exists()
    assert [i["id"] for i in e8["items"]] == [i["id"] for i in e9["items"]] and len(e8["items"]) == 16
    assert e9["aggregate"]["judge"]["kind"] == "reference (not an LLM)"
    for series, scorers in (("e9", ["rule", "judge"]), ("e14", ["rule", "panel"]), ("h2", ["rule", "judge"])):
        diagonal = json.loads((smoke_run / f"results/eval/{series}/diagonal.json").read_text())
        assert diagonal["scorers"] == scorers and diagonal["n"] == 16
        assert {"drift", "agreement", "kappa", "kappa_interval", "disagreements"} <= set(diagonal)
    metrics = json.loads((smoke_run / "results/report/metrics.json").read_text())
    assert set(metrics["series"]) == set(SMOKE_CONFIG.series)
    assert set(metrics["diagonal"]) == set(DIAGONALS) and set(metrics["training"]) == set(TRAIN_SERIES)
    assert any("not an LLM" in line for line in metrics["limits"])
    # every train series and the warm start read greedy, on shuffled charts and sampled
    tables = metrics["test_accuracy"]["series"]
    assert set(tables) == set(TRAIN_SERIES) | {"warmstart (tools)", "warmstart (no tool)"}
    controls = {"test", "test_shuffled_images", "test_sampled"}
    tool_policies = {sid for sid in TRAIN_SERIES if metrics["series"][sid]["config"]["tools"]} | {"warmstart (tools)"}
    # and every tool policy once more with the unedited chart shown after each call (the tool-placebo control)
    assert all(set(t) == controls | ({"test_placebo"} if n in tool_policies else set()) for n, t in tables.items())
    # the same greedy answers under the published ChartQA rule, beside chartrl's, in the tables and the headline
    assert all(t["test"]["published_by_question_type"]["all"]["n"] == t["test"]["n"] for t in tables.values())
    assert all(r["published_accuracy"] for r in metrics["finding"]["rows"].values() if r["test_accuracy"])
    # and the eval series': each rule item scored by it, each scored series and matrix row with it or why not
    assert all("published_score" in item for item in e8["items"]) and e8["aggregate"]["published_accuracy"] is not None
    assert e9["aggregate"]["published_accuracy"] is None and "rule scorer" in e9["aggregate"]["why_no_published"]
    scored = [agg for block in metrics["test"].values() for agg in block["scores"].values()]
    assert all((agg["published_accuracy"] is None) != (agg.get("why_no_published") is None) for agg in scored)
    assert all(row["published"]["n"] == 16 for row in metrics["comparisons"]["scorer_matrix"]["rows"].values())
    spread = metrics["seed_spread"]["series"]
    assert all(s["spread"]["published_accuracy"]["n"] == len(s["per_seed"]) for s in spread.values() if s["per_seed"])
    assert "sampled: correct-label share" in (smoke_run / "results/report/index.html").read_text()

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_run}/results/mlflow.db")
    experiment = client.get_experiment_by_name("chartrl-smoke")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    train_run = json.loads((smoke_run / "results/runs/e6/run.json").read_text())["mlflow_run_id"]
    assert runs["e9/score/judge"].data.tags["mlflow.parentRunId"] == train_run  # nested under e6/train
    assert runs["e8/generate"].data.tags["mlflow.parentRunId"] == train_run
    assert {a.path for a in client.list_artifacts(runs["report"].info.run_id)} == {"index.html", "metrics.json"}


def test_snakemake_report_collects_the_marked_outputs(smoke_run, tmp_path):
    out = tmp_path / "report.html"
    snakemake(smoke_run, "--configfile", SMOKE, "--report", str(out))
    assert out.stat().st_size > 100_000


def test_the_report_renders_in_a_real_browser(smoke_run, tmp_path):
    """Headless Chromium opens the report from file://: every plot renders, every image loads, no script error,
    and the screenshot is not blank."""
    import subprocess

    from PIL import Image

    page = (smoke_run / "results/report/index.html").as_uri()
    flags = headless_chromium(find_chromium(), tmp_path / "profile", "1280,2000", 8000)
    flags += ["--enable-logging=stderr", "--v=0"]
    dom = subprocess.run([*flags, "--dump-dom", page], capture_output=True, text=True, timeout=120)
    match = re.search(r'data-selfcheck="([^"]*)"', dom.stdout)
    assert match, dom.stderr[-2000:]
    check = json.loads(match.group(1).replace("&quot;", '"'))
    # two figures per reward generation (v1, v2, v3 and the hack control's), the habits the generations' shaping acts
    # on, and the test curve
    assert check["plots"] == 10 and check["plots_rendered"] == 10
    assert check["images"] > 0 and check["images_loaded"] == check["images"]
    assert check["errors"] == [] and "Uncaught" not in dom.stderr
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", page], capture_output=True, timeout=120, check=True)
    image = Image.open(shot).convert("L")
    assert image.getextrema()[0] < 100  # dark pixels: text and plot lines drawn, not a blank page


def test_smoke_report_has_every_panel_filled_or_explained(smoke_run):
    from chartrl.report.panels import panel_problems

    assert panel_problems(smoke_run / "results/report") == []
    metrics = json.loads((smoke_run / "results/report/metrics.json").read_text())
    panels = {p["id"]: p for p in metrics["panels"]}
    # the local backend runs every control: only the seed spread (one seed in the smoke config) and the study's
    # published numbers (config/gpu.yaml has them) are absent; identical series are shown only where the run has some
    unfilled = {pid for pid, p in panels.items() if not p["filled"]} - {"comparisons/identical"}
    assert unfilled == {"seed_spread", "comparisons/reference"}
    matrix = metrics["comparisons"]["scorer_matrix"]
    assert matrix["missing"] == [] and all(len(row["cells"]) == 3 for row in matrix["rows"].values())
    # best-of-N on e4: every method under the rule, with its interval, its gap to greedy and its costs
    rerank = metrics["rerank"]["series"]["e4"]["scores"]["rule"]
    assert set(rerank["methods"]) == {"greedy", "scs", "confidence", "oracle", "mean_sample"}
    for values in rerank["methods"].values():
        assert values["low"] <= values["accuracy"] <= values["high"] and values["costs"]["samples"] > 0
    assert rerank["methods"]["oracle"]["accuracy"] >= rerank["methods"]["scs"]["accuracy"]
    assert "external scorer" in panels["rerank"]["note"]  # not in the smoke config's methods: said so
    # the shortcut filter's card: every train question of the smoke split examined, each rate with its interval
    card = metrics["shortcut_filter"]["synthchart"]
    assert panels["shortcut_filter/synthchart"]["filled"] and card["examined"] == card["rows"] == 48
    assert set(card["by_question_type"]) == {"value", "count", "compare"}
    for summary in card["by_question_type"].values():
        rate = summary["shortcut_rate"]
        assert rate["low"] <= rate["mean"] <= rate["high"] and set(summary["accuracy_without_chart"]) == {
            "blank",
            "shuffled",
        }
    assert 'data-shortcut="synthchart/by_question_type"' in (smoke_run / "results/report/index.html").read_text()
