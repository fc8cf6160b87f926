# The evaluation stage's helpers (rules/evaluate.smk): which series generates the generations others score, the
# diagonal pairs, a job's spec, code, launch prefix and command, the targets.

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
# Each diagonal's two scorers (the first scores file's, then the second's), and the diagonals an extra seed repeats.
DIAGONAL_SCORERS = {sid: [Path(path).stem.removeprefix("scores_") for path in pair] for sid, pair in DIAGONALS.items()}


def eval_train_run(wildcards):
    return f"results/runs/{CFG.series[wildcards.series].of}/run.json"


def eval_data(wildcards):
    series = CFG.series[wildcards.series]
    return f"results/data/{series.dataset}/{series.split}.parquet"


def judges(scorer):
    """Whether `scorer` asks a judge (judge, panel): a rule scorer reads nothing of the judge section."""
    return chartrl.SCORER_JUDGES[scorer] in ("judge", "panel")


def eval_entries(with_rerank=False):
    """What an evaluation job's spec holds besides the config: the eval series (with its id; its `rerank` settings
    only where `with_rerank`, the rerank jobs: changing them reruns nothing else) and the train series it reads."""

    def series(wildcards):
        own = chartrl.to_plain(CFG.resolved["series"][wildcards.series])
        if not with_rerank:
            own.pop("rerank", None)
        return {"id": wildcards.series, **own}

    def of(wildcards):
        train = CFG.series[wildcards.series].of
        return {"id": train, **chartrl.to_plain(CFG.resolved["series"][train])}

    return {"series": series, "of": of}


def scorer_judge(wildcards):
    """The judge: section a score job reads: the judge that rewarded the generations' series, only for a scorer
    that judges."""
    return CFG.judge_section(wildcards.series) if judges(wildcards.scorer) else chartrl.OMIT


def scorer_code(wildcards):
    """The code of a score job's scorer: the reward it is and the judge it asks."""
    return chartrl.scorer_code(CFG, wildcards.series, wildcards.scorer)


# The reward x scorer matrix: the cells of every evaluated checkpoint that no eval series asks for
# (chartrl.evaluate.matrix), scored by the matrix_score rule.
MATRIX_FILES = [f"results/{path}" for path in chartrl.extra_matrix_files(CFG)]


def eval_targets():
    targets = [scores_path(s.id, scorer) for s in CFG.eval_series for scorer in s.scorers]
    targets += rerank_targets()
    return targets + [f"results/eval/{series}/diagonal.json" for series in DIAGONALS] + MATRIX_FILES


# Best-of-N reranking (an eval series' `rerank`): local backend only. On verl, N samples per question would be a
# second verl generation job (val_kwargs.n with do_sample) that is not wired; the report says so in place.
RERANK_SERIES = [] if VERL else [s.id for s in CFG.eval_series if s.rerank is not None]


def rerank_targets():
    return [f"results/eval/{sid}/rerank_{scorer}.json" for sid in RERANK_SERIES for scorer in CFG.series[sid].scorers]


rerank_job_spec = job_spec("rerank", **eval_entries(with_rerank=True))


def rerank_launch(wildcards):
    """The launcher prefix of a rerank sampling job (as a generate job: evaluate.threads, ray.job_gpus)."""
    return local_launch("rerank", wildcards.series, rerank_job_spec(wildcards))


def verl_generate_overrides(wildcards):
    """An eval series' verl generation job (chartrl.verl_backend.overrides.eval_overrides), shell-quoted, its paths
    under WORKDIR."""
    return shlex.join(chartrl.eval_overrides(CFG, wildcards.series, chartrl.WORKDIR))


score_job_spec = job_spec("score", sections={"judge": scorer_judge}, **eval_entries())  # score and matrix_score
diagonal_job_spec = job_spec("diagonal", **eval_entries())
rerank_score_job_spec = job_spec("rerank-score", sections={"judge": scorer_judge}, **eval_entries(with_rerank=True))
GENERATE_COMMAND = "verl generate" if VERL else "generate"
generate_job_spec = job_spec(GENERATE_COMMAND, **eval_entries())


def diagonal_judge(wildcards):
    """The judge: section an extra seed's diagonal reads: the eval series' judge, when one of its two scorers judges."""
    scorers = DIAGONAL_SCORERS[wildcards.series]
    return CFG.judge_section(wildcards.series) if any(judges(s) for s in scorers) else chartrl.OMIT


def diagonal_code(wildcards):
    """The code of an extra seed's diagonal: both scorers' rewards and the judge they ask."""
    scorers = DIAGONAL_SCORERS[wildcards.series]
    return sorted({module for scorer in scorers for module in chartrl.scorer_code(CFG, wildcards.series, scorer)})


seed_diagonal_job_spec = job_spec("seed-diagonal", sections={"judge": diagonal_judge}, **eval_entries())


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


def test_accuracy_spec(series_id):
    """A test-accuracy job's spec (of a train series, or of "warmstart")."""
    series = {"id": series_id, **chartrl.to_plain(CFG.resolved["series"].get(series_id, {}))}
    return chartrl.job_spec("test-accuracy", CFG, series=series)


# The study's per-question-type test accuracy, its controls and the test curve grade answers by relaxed accuracy of
# <answer>; a recipe overlay whose eval series use the recipe's own scorers (r1v, multiple_choice) reports those
# instead, so these jobs are not run for it (the report says why in their place).
STUDY_ANALYSIS = not set(chartrl.matrix_scorers(CFG)) <= set(chartrl.RECIPE_SCORERS)
SEEDED_DIAGONALS = [sid for sid in DIAGONALS if CFG.series[sid].of in SEEDED_SERIES] if STUDY_ANALYSIS else []


def test_accuracy_targets():
    if CFG.backend != "local" or not STUDY_ANALYSIS:
        return []
    targets = [f"results/eval/{series}/test_accuracy.json" for series in TRAIN_SERIES]
    if CFG.model.path is None:
        targets += [f"results/eval/warmstart/test_accuracy_tools_{mode}.json" for mode in ("on", "off")]
    return targets


def seed_targets():
    """Each extra seed's run, tested like the main run (its training comes with it), and the diagonal check of each
    eval series with one whose train series the seeds train."""
    seeds = CFG.extra_seeds
    targets = [f"results/seeds/{series}/seed{seed}/test_accuracy.json" for series in SEEDED_SERIES for seed in seeds]
    targets += [f"results/seeds/{series}/seed{seed}/diagonal.json" for series in SEEDED_DIAGONALS for seed in seeds]
    return targets


def test_accuracy_launch(wildcards):
    """The launcher prefix of a train run's test-accuracy job: it reserves evaluate.threads and ray.job_gpus."""
    return local_launch("test", train_job_name(wildcards), test_accuracy_spec(wildcards.series))


# The test curve (the test_curve rule) of every train series an eval series reads, on the local backend (on verl
# each checkpoint would need its own merge and verl generation; the report says so in the curve's spot).
CURVE_SERIES = sorted({series.of for series in CFG.eval_series}) if CFG.backend == "local" and STUDY_ANALYSIS else []


def test_curve_spec(series_id):
    """A test curve's spec: the train series, with the checkpoint each eval series of it names."""
    series = {"id": series_id, **chartrl.to_plain(CFG.resolved["series"][series_id])}
    chosen = {s.id: s.checkpoint for s in CFG.eval_series if s.of == series_id}
    return chartrl.job_spec("test-curve", CFG, series=series, chosen=chosen)


def test_curve_start(wildcards):
    """The step-0 point: the warm start's test accuracy with the series' tool setting, when the run trained from
    the warm-started model (model.path unset); none otherwise."""
    if CFG.model.path is not None:
        return []
    return f"results/eval/warmstart/test_accuracy_tools_{'on' if CFG.series[wildcards.series].tools else 'off'}.json"


def test_curve_targets():
    return [f"results/eval/{series}/test_curve.json" for series in CURVE_SERIES]


# The tool-path check (evaluate.tool_path_check): every split of the train dataset, and the policy's model (its
# processor and vision tower: the warm-started tiny model, or model.path).
TOOL_PATH_SPLITS = dataset_splits(TRAIN_DATASET) if CFG.evaluate.tool_path_check else ()


def tool_path_check_targets():
    return ["results/tools/path_check.json"] if CFG.evaluate.tool_path_check else []


def tool_path_check_inputs(wildcards):
    inputs = {split: f"results/data/{TRAIN_DATASET}/{split}.parquet" for split in TOOL_PATH_SPLITS}
    model = policy_model(wildcards)
    return {**inputs, "model": model} if model else inputs


def tool_path_check_shell():
    splits = " ".join(f"--split {split}={{input.{split}:q}}" for split in TOOL_PATH_SPLITS)
    return (
        f"chartrl tools path-check --model {policy_model_argument()} {splits} --out {{output:q}}"
        " --spec {params.spec:q} --threads {threads} > {log:q} 2>&1"
    )
