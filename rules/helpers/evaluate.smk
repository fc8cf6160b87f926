# The evaluation stage's helpers (rules/evaluate.smk): which series generates the generations others score, the
# diagonal pairs, a job's spec, launch prefix and command, the targets.
from chartrl.evaluate.matrix import RECIPE_SCORERS, extra_matrix_files, matrix_scorers
from chartrl.evaluate.score import SCORER_JUDGES

EVAL_CODE = TRAIN_CODE + package_sources("evaluate")  # (with verl_backend/ for the verl backend)


def _generation_key(series):
    return (series.of, str(series.checkpoint), series.dataset, series.split)


GENERATION_OWNER = {}  # key -> the first eval series (config order) with it: the one whose rule generates
for _series in CFG.eval_series:
    GENERATION_OWNER.setdefault(_generation_key(_series), _series.id)
GENERATING_SERIES = sorted(set(GENERATION_OWNER.values()))


def generations_of(series_id):
    """The generations file an eval series scores: shared by every series naming the same checkpoint and data."""
    return f"results/eval/{GENERATION_OWNER[_generation_key(CFG.series[series_id])]}/generations.parquet"


def scores_path(series_id, scorer):
    return f"results/eval/{series_id}/scores_{scorer}.json"


def _diagonals():
    """series -> (first scores, second scores): the checkpoint's first (series, scorer) against each later one with
    another scorer; the file goes under the series that completes the pair (e9 for e8/e9)."""
    pairs, groups = {}, {}
    for series in CFG.eval_series:
        groups.setdefault(_generation_key(series), []).extend((series.id, scorer) for scorer in series.scorers)
    for entries in groups.values():
        reference = entries[0]
        for series_id, scorer in entries[1:]:
            if scorer != reference[1] and series_id not in pairs:
                pairs[series_id] = (scores_path(*reference), scores_path(series_id, scorer))
    return pairs


DIAGONALS = _diagonals()


def eval_train_run(wildcards):
    return f"results/runs/{CFG.series[wildcards.series].of}/run.json"


def eval_data(wildcards):
    series = CFG.series[wildcards.series]
    return f"results/data/{series.dataset}/{series.split}.parquet"


def judges(scorer):
    """Whether `scorer` asks a judge (judge, panel): a rule scorer reads nothing of the judge section."""
    return SCORER_JUDGES[scorer] in ("judge", "panel")


def eval_job_spec(*sections, evaluate=None, with_rerank=False, with_judge=False):
    """What an evaluation job depends on: the eval series, the train series it reads (`of`), `sections`, the
    evaluate keys of the `evaluate` kind of job, and the judge section where `with_judge` and the job's scorer
    judges. The series' `rerank` settings only where `with_rerank` (the rerank jobs): changing them reruns nothing
    else."""

    def spec(wildcards):
        series = CFG.series[wildcards.series]
        own = to_plain(CFG.resolved["series"][series.id])
        if not with_rerank:
            own.pop("rerank", None)
        data = {
            "series": {"id": series.id, **own},
            "of": {"id": series.of, **to_plain(CFG.resolved["series"][series.of])},
        }
        data.update({name: to_plain(CFG.resolved[name]) for name in sections})
        if evaluate is not None:
            data["evaluate"] = evaluate_keys(evaluate)
        if with_judge and judges(wildcards.scorer):
            data["judge"] = CFG.judge_section(series.id)  # the judge that rewarded the generations' series
        return json.dumps(data, sort_keys=True)

    return spec


# The reward x scorer matrix: the cells of every evaluated checkpoint that no eval series asks for
# (chartrl.evaluate.matrix), scored by the matrix_score rule.
MATRIX_FILES = [f"results/{path}" for path in extra_matrix_files(CFG)]


def eval_targets():
    targets = [scores_path(s.id, scorer) for s in CFG.eval_series for scorer in s.scorers]
    targets += rerank_targets()
    return targets + [f"results/eval/{series}/diagonal.json" for series in DIAGONALS] + MATRIX_FILES


# Best-of-N reranking (an eval series' `rerank`): local backend only. On verl, N samples per question would be a
# second verl generation job (val_kwargs.n with do_sample) that is not wired; the report says so in place.
RERANK_SERIES = [] if VERL else [s.id for s in CFG.eval_series if s.rerank is not None]


def rerank_targets():
    return [f"results/eval/{sid}/rerank_{scorer}.json" for sid in RERANK_SERIES for scorer in CFG.series[sid].scorers]


rerank_job_spec = eval_job_spec("rollout", "prompts", "tools", evaluate="rerank", with_rerank=True)


def rerank_launch(wildcards):
    """The launcher prefix of a rerank sampling job (as a generate job: evaluate.threads, ray.job_gpus)."""
    return local_launch("rerank", wildcards.series, rerank_job_spec(wildcards))


def verl_generate_overrides(wildcards):
    """An eval series' verl generation job (chartrl.verl_backend.overrides.eval_overrides), shell-quoted."""
    from chartrl.verl_backend.overrides import eval_overrides

    return shlex.join(eval_overrides(CFG, wildcards.series, os.getcwd()))


score_job_spec = eval_job_spec(evaluate="score", with_judge=True)  # the score and matrix_score rules
diagonal_job_spec = eval_job_spec(evaluate="diagonal")
rerank_score_job_spec = eval_job_spec(evaluate="rerank_score", with_rerank=True, with_judge=True)
if VERL:
    generate_job_spec = eval_job_spec("rollout", "prompts", "tools", "model", "verl", evaluate="generate_verl")
else:
    generate_job_spec = eval_job_spec("rollout", "prompts", "tools", evaluate="generate")


def generate_launch(wildcards):
    """The launcher prefix of a generate job (as train_launch: verl's driver takes one CPU, its workers the GPUs)."""
    spec = generate_job_spec(wildcards)
    if VERL:
        config_text = spec + verl_generate_overrides(wildcards)
        return launch_command("generate", wildcards.series, config_text, num_cpus=1, num_gpus=0)
    return local_launch("generate", wildcards.series, spec)


def generate_shell():
    """The generate command: the local policy's generations, or verl's (trainer.val_only) with the eval series'
    Hydra overrides after `--`."""
    command = "chartrl verl generate" if VERL else "chartrl generate"
    overrides = " -- {params.overrides}" if VERL else ""
    return (
        f"{{params.launch}} {command} --spec {{params.spec:q}} --run {{input.run:q}} --data {{input.data:q}}"
        " --out {output.generations:q} --gallery {output.gallery:q} --tracking-uri {params.tracking_uri:q}"
        f" --experiment {{params.experiment:q}}{overrides} > {{log:q}} 2>&1"
    )


# Per-type test accuracy is read from the test split the evaluate section names (the report reads it too).
TEST_DATA = f"results/data/{CFG.resolved['evaluate']['dataset']}/{CFG.resolved['evaluate']['split']}.parquet"


def test_accuracy_spec(series_id, kind="test_accuracy"):
    """A test-accuracy job's spec (of a train series, or of "warmstart"): the series, the rollout, prompts and tools,
    and the evaluate keys of `kind` (test_accuracy, test_curve)."""
    sections = {name: to_plain(CFG.resolved[name]) for name in ("rollout", "prompts", "tools")}
    series = {"id": series_id, **to_plain(CFG.resolved["series"].get(series_id, {}))}
    return json.dumps({"series": series, **sections, "evaluate": evaluate_keys(kind)}, sort_keys=True)


# The study's per-question-type test accuracy, its controls and the test curve grade answers by relaxed accuracy of
# <answer>; a recipe overlay whose eval series use the recipe's own scorers (r1v, multiple_choice) reports those
# instead, so these jobs are not run for it (the report says why in their place).
STUDY_ANALYSIS = not set(matrix_scorers(CFG)) <= set(RECIPE_SCORERS)


def test_accuracy_targets():
    if CFG.backend != "local" or not STUDY_ANALYSIS:
        return []
    targets = [f"results/eval/{series}/test_accuracy.json" for series in TRAIN_SERIES]
    if CFG.model.path is None:
        targets += [f"results/eval/warmstart/test_accuracy_tools_{mode}.json" for mode in ("on", "off")]
    return targets


def seed_targets():
    """Each extra seed's run, tested like the main run (its training comes with it)."""
    if CFG.backend != "local":
        return []
    return [
        f"results/seeds/{series}/seed{seed}/test_accuracy.json" for series in TRAIN_SERIES for seed in CFG.extra_seeds
    ]


def test_accuracy_launch(wildcards):
    """The launcher prefix of a train run's test-accuracy job: it reserves evaluate.threads and ray.job_gpus."""
    return local_launch("test", train_job_name(wildcards), test_accuracy_spec(wildcards.series))


# The test curve (the test_curve rule) of every train series an eval series reads, on the local backend (on verl
# each checkpoint would need its own merge and verl generation; the report says so in the curve's spot).
CURVE_SERIES = sorted({series.of for series in CFG.eval_series}) if CFG.backend == "local" and STUDY_ANALYSIS else []


def test_curve_spec(series_id):
    """The test_accuracy spec of the train series, with the checkpoint each eval series of it names."""
    chosen = {s.id: s.checkpoint for s in CFG.eval_series if s.of == series_id}
    return json.dumps({**json.loads(test_accuracy_spec(series_id, "test_curve")), "chosen": chosen}, sort_keys=True)


def test_curve_start(wildcards):
    """The step-0 point: the warm start's test accuracy with the series' tool setting, when the run trained from
    the warm-started model (model.path unset); none otherwise."""
    if CFG.model.path is not None:
        return []
    return f"results/eval/warmstart/test_accuracy_tools_{'on' if CFG.series[wildcards.series].tools else 'off'}.json"


def test_curve_targets():
    return [f"results/eval/{series}/test_curve.json" for series in CURVE_SERIES]
