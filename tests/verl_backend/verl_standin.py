"""Stands in for ``python -m verl.trainer.main_ppo`` in tests: verl's trainer cannot run on the CPU (verl 0.9.1 has
no CPU platform and its rollouts need vLLM or SGLang). Up to the GPU work it does what ``chartrl verl train`` relies
on verl for, with verl's own code: it composes the overrides it is given (Hydra, as main_ppo) and validates them
(``validate_config``); it loads the train and validation data with verl's ``RLHFDataset`` and the model's
processor, scores canned responses with our reward through verl's own loader (``get_custom_reward_fn``) and logs,
through verl's own ``Tracking`` logger (MLflow, attached to the run named in the Ray runtime env, as verl's actors
see it), the metric keys verl's v1 trainer logs: per step ``compute_data_metrics`` of a batch shaped as the trainer
builds it (GRPO advantages from verl's ``core_algos``), and at validation (``val_before_train``, every
``test_freq`` steps and the last step) ``_val_metrics_update`` of our reward's extra info. It runs up to 8 steps,
from the step of the checkpoint ``resume_mode=auto`` finds (verl's ``find_latest_ckpt_path``), and saves
checkpoints as verl does (every ``save_freq`` steps and the last, in ``FSDPCheckpointManager``'s layout,
with the starting model's weights; older ones beyond ``max_actor_ckpt_to_keep`` deleted). ``STANDIN_STEP_S=S``
makes each step take S seconds, as a real step takes minutes. With
``trainer.val_only`` it writes the generation dump with verl's own writer (``_write_generations``) and our
generation reward.

The responses are canned, not generated (a stand-in has no policy), and vary with the step so curves move: in
training, sample ``j`` of a prompt answers right when ``j < step``; a tool series' sample 0 masks to the asked
label, sample 1 to another label, the rest call nothing. At validation, question ``i`` is answered right (with a
call keeping its label) when ``i % 4 <= step``. In a generation job the first sample of each question masks to
its asked label and answers right, the others answer "0"; it reads the questions as verl does (``RLHFDataset``,
``data.val_max_samples``), and ``STANDIN_FAILED_LOOPS=K`` leaves the last K questions out of the dump, as verl leaves
out an agent loop that failed. ``STANDIN_EXIT=N`` makes it fail with N.
``STANDIN_MLFLOW_URI=URI`` points verl's MLflow logger at another store (one it cannot open): verl then logs a
warning, trains on without MLflow and exits 0, as it does on a cluster whose workers cannot reach the tracking
server."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

STEPS = 8
"""At most this many training steps (the config's total_training_steps otherwise)."""
TOOL_TURN = "<tool_call>\n{call}\n</tool_call>\nuser\n<tool_response>\nMasked.\n</tool_response>\nassistant\n"


def main(argv: list[str]) -> int:
    if os.environ.get("STANDIN_EXIT"):
        print("stand-in: failing as asked", flush=True)
        return int(os.environ["STANDIN_EXIT"])
    import torch
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.tracking import Tracking

    config_dir = Path(__import__("verl").__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=[a for a in argv if not a.startswith("hydra.")])
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    if config.trainer.val_only:
        return generate(config)
    env = config.ray_kwargs.ray_init.runtime_env.env_vars  # what verl's Ray actors get
    assert env.MLFLOW_RUN_ID == os.environ["MLFLOW_RUN_ID"], "the run in the runtime env is not the job's"
    os.environ.update(MLFLOW_TRACKING_URI=env.MLFLOW_TRACKING_URI, MLFLOW_RUN_ID=env.MLFLOW_RUN_ID)
    if os.environ.get("STANDIN_MLFLOW_URI"):
        import verl.utils.tracking

        verl.utils.tracking.MLFLOW_SLEEP_SECONDS = 0  # verl retries 3 times, 5 s apart: the same path, faster
        os.environ["MLFLOW_TRACKING_URI"] = os.environ["STANDIN_MLFLOW_URI"]
    for key in ("train_files", "val_files"):
        assert Path(config.data[key]).is_file(), f"data.{key} was not written"
    tracking = Tracking(
        project_name=config.trainer.project_name,
        experiment_name=config.trainer.experiment_name,
        default_backend=list(config.trainer.logger),
        config=OmegaConf.to_container(config, resolve=False),
    )
    data = Data(config)
    steps = min(STEPS, config.trainer.total_training_steps)
    step_seconds = float(os.environ.get("STANDIN_STEP_S", "0"))
    start = resumed_step(config)
    if config.trainer.val_before_train:
        tracking.log(data.validation(start), step=start)
    for step in range(start + 1, steps + 1):
        time.sleep(step_seconds)  # a step of a real run takes minutes; the checkpoint keeper polls meanwhile
        metrics = data.training_step(step)
        if config.trainer.test_freq > 0 and (step == steps or step % config.trainer.test_freq == 0):
            metrics.update(data.validation(step))  # the trainer merges validation into the step's metrics
        tracking.log(metrics, step=step)
        if step == steps or step % config.trainer.save_freq == 0:  # verl's rule (ray_trainer.fit)
            save_checkpoint(config, step, torch)
    tracking.finish()
    print("stand-in: done", flush=True)
    return 0


def resumed_step(config) -> int:
    """The step training continues from, as the trainer's ``_load_checkpoint`` finds it with verl's own
    ``find_latest_ckpt_path``: the tracker file's step under ``default_local_dir`` (``resume_mode=auto``), else 0."""
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    if config.trainer.resume_mode != "auto":
        return 0
    folder = find_latest_ckpt_path(str(config.trainer.default_local_dir))
    if folder is None:
        print("stand-in: training from scratch", flush=True)
        return 0
    print(f"stand-in: resuming from {folder}", flush=True)
    return int(folder.split("global_step_")[-1])


def save_checkpoint(config, step, torch):
    """A checkpoint in ``FSDPCheckpointManager``'s layout and order (shards, ``huggingface/``, then
    ``fsdp_config.json``) with the starting model's weights, then what verl's manager does after a save
    (``register_checkpoint``: older ``global_step_*`` folders beyond ``trainer.max_actor_ckpt_to_keep`` are deleted),
    and last what the trainer does (the tracker file names the step)."""
    import shutil

    from transformers import AutoModelForImageTextToText

    root = Path(config.trainer.default_local_dir)
    actor = root / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True, exist_ok=True)
    model = Path(config.actor_rollout_ref.model.path)
    weights = AutoModelForImageTextToText.from_pretrained(model).state_dict()
    torch.save(weights, actor / "model_world_size_1_rank_0.pt")
    for item in model.iterdir():  # config, tokenizer and processor files, as verl saves them beside the shards
        if item.is_file() and item.suffix != ".safetensors":
            (actor / "huggingface" / item.name).write_bytes(item.read_bytes())
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))  # verl: after those
    keep = config.trainer.max_actor_ckpt_to_keep
    saved = sorted((p for p in root.glob("global_step_*") if p.is_dir()), key=lambda p: int(p.name.split("_")[-1]))
    for old in saved[:-keep] if keep and keep > 0 else []:
        shutil.rmtree(old)
    (root / "latest_checkpointed_iteration.txt").write_text(str(step))  # the trainer's, after the whole save


def load_dataset(config, files, processor, limit=None):
    """verl's RLHFDataset over ``files``, as the trainer builds it (the overlong filter without workers)."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    data = OmegaConf.create(OmegaConf.to_container(config.data) | {"filter_overlong_prompts_workers": None})
    return RLHFDataset(files, processor.tokenizer, data, processor=processor, max_samples=limit or -1)


def asked_labels(extra) -> tuple[list[str], list[str]]:
    """The labels a call keeps to answer the question (its ``about``, else the chart's first), and another."""
    labels = sorted(json.loads(extra["bboxes"]).get("x_values", {}))
    about = [label for label in json.loads(extra.get("about") or "[]") if label in labels] or labels[:1]
    other = [label for label in labels if label not in about][:1]
    return about, other


def canned(item, *, labels: list[str] | None, right: bool) -> tuple[str, int]:
    """A response (a call keeping ``labels`` when given and the agent offers tools, then an answer) and its number
    of turns as verl's agent loops count them (user + assistant turns + 1)."""
    from chartrl.verl_backend.overrides import TOOL_AGENT

    truth = item["reward_model"]["ground_truth"]
    call = ""
    if item["agent_name"] == TOOL_AGENT and labels:
        arguments = {"x_values": labels}
        call = TOOL_TURN.format(call=json.dumps({"name": "focus_on_x_values_with_mask", "arguments": arguments}))
    return call + f"<answer>{truth if right else '0'}</answer>", 4 if call else 2


def step_metrics(scores, lengths, turns, groups, width: int, prompt: int = 8) -> dict[str, float]:
    """verl's ``compute_data_metrics`` of a batch shaped as the v1 trainer builds it: each response's score on
    its last token, GRPO advantages from verl's ``core_algos``, per-row lengths and turn counts."""
    import numpy as np
    import torch
    from tensordict import TensorDict
    from verl import DataProto
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
    from verl.trainer.ppo.metric_utils import compute_data_metrics

    size = len(scores)
    response_mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
    token_scores = torch.zeros(size, width)
    token_scores[torch.arange(size), torch.tensor(lengths) - 1] = torch.tensor(scores, dtype=torch.float)
    advantages, returns = compute_grpo_outcome_advantage(token_scores, response_mask, np.array(groups))
    batch = TensorDict(
        {
            "token_level_scores": token_scores,
            "token_level_rewards": token_scores,
            "advantages": advantages,
            "returns": returns,
            "prompts": torch.zeros(size, 2 * prompt, dtype=torch.long),  # left-padded to twice the prompt
            "responses": torch.zeros(size, width, dtype=torch.long),
            "response_mask": response_mask,
            "attention_mask": torch.cat(
                [
                    torch.zeros(size, prompt, dtype=torch.long),
                    torch.ones(size, prompt, dtype=torch.long),
                    response_mask,
                ],
                dim=1,
            ),
            "prompt_length": torch.full((size,), float(prompt)),
            "response_length": torch.tensor(lengths, dtype=torch.float),
        },
        batch_size=size,
    )
    data = DataProto(batch=batch, non_tensor_batch={"__num_turns__": np.array(turns, dtype=np.int32)})
    return {key: float(value) for key, value in compute_data_metrics(data, use_critic=False).items()}


class Data:
    """The job's data and reward, loaded with verl's code, and the metrics verl logs for canned responses."""

    def __init__(self, config):
        from transformers import AutoProcessor
        from verl.trainer.ppo.reward import get_custom_reward_fn

        self.config = config
        self.processor = AutoProcessor.from_pretrained(config.actor_rollout_ref.model.path)
        self.reward = get_custom_reward_fn(config)
        self.batch = config.data.train_batch_size
        self.train = load_dataset(config, config.data.train_files, self.processor, limit=self.batch * STEPS)
        val_rows = config.data.get("val_max_samples")
        self.val = load_dataset(config, config.data.val_files, self.processor, limit=val_rows if val_rows else None)

    def score(self, item, text):
        return self.reward(
            data_source=item["data_source"],
            solution_str=text,
            ground_truth=item["reward_model"]["ground_truth"],
            extra_info=dict(item["extra_info"]),
        )

    def training_step(self, step: int) -> dict[str, float]:
        """verl's ``compute_data_metrics`` of this step's rollouts (``rollout.n`` canned responses per prompt)."""
        n = self.config.actor_rollout_ref.rollout.n
        width = self.config.data.max_response_length
        scores, lengths, turns, groups = [], [], [], []
        for k in range(self.batch):
            item = self.train[((step - 1) * self.batch + k) % len(self.train)]
            about, other = asked_labels(item["extra_info"])
            for j in range(n):
                text, num_turns = canned(item, labels=[about, other][j] if j < 2 else None, right=j < step)
                scores.append(float(self.score(item, text)["score"]))
                lengths.append(min(width, len(self.processor.tokenizer.encode(text, add_special_tokens=False))))
                turns.append(num_turns)
                groups.append(str(k))
        metrics = step_metrics(scores, lengths, turns, groups, width)
        metrics.update({"training/global_step": step, "actor/pg_loss": 0.1 / step, "actor/entropy": 1.0 / step})
        return metrics

    def validation(self, step: int) -> dict[str, float]:
        """verl's ``_val_metrics_update`` of our reward's extra info on canned validation responses."""
        from verl.trainer.ppo.v1.trainer_base import PPOTrainer

        sources, uids, turns, infos = [], [], [], {"reward": []}
        for index in range(len(self.val)):
            item = self.val[index]
            right = index % 4 <= step
            text, num_turns = canned(item, labels=asked_labels(item["extra_info"])[0] if right else None, right=right)
            result = self.score(item, text)
            infos["reward"].append(result["score"])
            for key, value in result.items():
                infos.setdefault(key, []).append(value)
            sources.append(item["data_source"])
            uids.append(f"uid-{index}")
            turns.append(num_turns)
        metrics = PPOTrainer._val_metrics_update(None, sources, uids, infos, turns)
        return {key: float(value) for key, value in metrics.items()}


def generate(config) -> int:
    from transformers import AutoProcessor
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    from chartrl.verl_backend.rewards import generation_record

    processor = AutoProcessor.from_pretrained(config.actor_rollout_ref.model.path)
    dataset = load_dataset(config, config.data.val_files, processor, limit=config.data.get("val_max_samples", -1))
    n = config.actor_rollout_ref.rollout.val_kwargs.n
    failed = int(os.environ.get("STANDIN_FAILED_LOOPS", "0"))
    inputs, outputs, gts, records = [], [], [], []
    for index in range(len(dataset) - failed):
        item = dataset[index]
        extra, truth = item["extra_info"], item["reward_model"]["ground_truth"]
        for sample in range(n):
            text, _ = canned(item, labels=asked_labels(extra)[0], right=sample == 0)
            inputs.append(extra["question"])
            outputs.append(text)
            gts.append(truth)
            records.append(generation_record(item["data_source"], text, truth, extra))
    PPOTrainer._write_generations(
        inputs=inputs,
        outputs=outputs,
        gts=gts,
        scores=[r["score"] for r in records],
        reward_extra_infos_dict={key: [r[key] for r in records] for key in ("acc", "row_id")},
        dump_path=config.trainer.validation_data_dir,
        global_steps=0,
    )
    print(f"stand-in: {len(outputs)} generations dumped", flush=True)
    return 0


SERVED = "STANDIN_FORKSERVER"
"""``on``, where the workflow's jobs run through chartrl's forkserver (``CHARTRL_FORKSERVER=on``): the stand-in runs
in a fork of a server of its own that imported torch, Hydra, verl and transformers once (about 6 s a process on a
2-core machine, most of a short stand-in run), as the workflow's jobs do; the first run starts the server and runs
itself. What ``chartrl verl`` does is unchanged: it starts this script as it would start verl, and the script's
exit status, output and signals are those of the forked run (chartrl.forkserver). The real verl starts afresh."""
PRELOAD = (
    "numpy",
    "torch",
    "tensordict",
    "hydra",
    "omegaconf",
    "transformers",
    "mlflow",
    "verl",
    "verl.utils.config",
    "verl.utils.tracking",
    "verl.utils.dataset.rl_dataset",
    "verl.trainer.ppo.utils",
    "verl.trainer.ppo.core_algos",
    "verl.trainer.ppo.metric_utils",
    "verl.trainer.ppo.reward",
    "verl.trainer.ppo.v1.trainer_base",
)


PER_JOB = frozenset(
    {
        "MLFLOW_TRACKING_URI",
        "MLFLOW_RUN_ID",
        "PYTEST_CURRENT_TEST",
        "STANDIN_EXIT",
        "STANDIN_FAILED_LOOPS",
        "STANDIN_MLFLOW_URI",
        "STANDIN_STEP_S",
    }
)
"""Variables the jobs of one stand-in server may differ in (left out of its socket's environment key): the MLflow
store and run a job logs to, which the preloaded libraries read when a job logs, not when they are imported, the
stand-in's own settings, which its run reads, and the test pytest is running (a module's tests share its server)."""


def serve_forks(path: str) -> int:
    """The stand-in's forkserver: its jobs run :func:`main`."""
    from chartrl import forkserver

    return forkserver.serve(Path(path), main, preload=PRELOAD)


def _served(argv: list[str]) -> int | None:
    from chartrl import forkserver

    here = str(Path(__file__).resolve().parent)
    command = (
        sys.executable,
        "-P",
        "-c",
        f"import sys; sys.path.insert(0, {here!r}); import verl_standin; "
        "sys.exit(verl_standin.serve_forks(sys.argv[1]))",
    )
    return forkserver.delegate(argv, command, "verl-standin-", forkserver.VOLATILE | PER_JOB)


if __name__ == "__main__":
    served = _served(sys.argv[1:]) if os.environ.get(SERVED) == "on" else None
    raise SystemExit(main(sys.argv[1:]) if served is None else served)
