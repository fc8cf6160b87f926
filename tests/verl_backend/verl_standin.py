"""Stands in for ``python -m verl.trainer.main_ppo`` in tests: verl's trainer cannot run on the CPU (its workers
need a GPU platform, its rollouts vLLM or SGLang). Up to the GPU work it does what ``chartrl verl train``
relies on verl for, with verl's own code: it composes the overrides it is given (Hydra, as main_ppo), validates
them (``validate_config``), logs two steps and a validation through verl's own ``Tracking`` logger (MLflow,
attached to the run named in the Ray runtime env, as verl's actors see it), and saves a checkpoint in
``FSDPCheckpointManager``'s layout, with the starting model's weights. With ``trainer.val_only`` it loads the data
with verl's ``RLHFDataset`` and the model's processor, and writes the generation dump with verl's own writer
(``_write_generations``) and our generation reward; the responses are canned, not generated (the first sample
of each question masks to its asked label and answers right, the others answer "0"): a stand-in has no policy.
``STANDIN_EXIT=N`` makes it fail with N. ``STANDIN_MLFLOW_URI=URI`` points verl's MLflow logger at another store
(one it cannot open): verl then logs a warning, trains on without MLflow and exits 0, as it does on a cluster whose
workers cannot reach the tracking server."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


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
    tracking.log({"val-aux/synthchart/accuracy/mean@1": 0.25, "val-core/synthchart/reward/mean@1": 0.3}, step=0)
    tracking.log({"critic/score/mean": 0.5, "actor/pg_loss": 0.1}, step=1)
    tracking.log({"critic/score/mean": 0.75, "actor/pg_loss": 0.05}, step=2)
    tracking.log({"val-aux/synthchart/accuracy/mean@1": 0.5, "val-core/synthchart/reward/mean@1": 0.6}, step=2)
    root = Path(config.trainer.default_local_dir)
    actor = root / "global_step_2" / "actor"
    (actor / "huggingface").mkdir(parents=True, exist_ok=True)
    model = Path(config.actor_rollout_ref.model.path)
    from transformers import AutoModelForImageTextToText

    weights = AutoModelForImageTextToText.from_pretrained(model).state_dict()
    torch.save(weights, actor / "model_world_size_1_rank_0.pt")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))
    for item in model.iterdir():  # config, tokenizer and processor files, as verl saves them beside the shards
        if item.is_file() and item.suffix != ".safetensors":
            (actor / "huggingface" / item.name).write_bytes(item.read_bytes())
    (root / "latest_checkpointed_iteration.txt").write_text("2")
    tracking.finish()
    print("stand-in: done", flush=True)
    return 0


def generate(config) -> int:
    from transformers import AutoProcessor
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from chartrl.rewards.verl_adapter import generation_record

    processor = AutoProcessor.from_pretrained(config.actor_rollout_ref.model.path)
    from omegaconf import OmegaConf

    data = OmegaConf.create(OmegaConf.to_container(config.data) | {"filter_overlong_prompts_workers": None})
    dataset = RLHFDataset(config.data.val_files, processor.tokenizer, data, processor=processor)
    n = config.actor_rollout_ref.rollout.val_kwargs.n
    inputs, outputs, gts, records = [], [], [], []
    for index in range(len(dataset)):
        item = dataset[index]
        extra, truth = item["extra_info"], item["reward_model"]["ground_truth"]
        labels = sorted(json.loads(extra["bboxes"]).get("x_values", {}))[:1]
        call = json.dumps({"name": "focus_on_x_values_with_mask", "arguments": {"x_values": labels}})
        tool_turn = f"<tool_call>\n{call}\n</tool_call>\nuser\n<tool_response>\nMasked.\n</tool_response>\nassistant\n"
        for sample in range(n):
            answer = truth if sample == 0 else "0"
            text = (tool_turn if item["agent_name"] == "tool_agent" and labels else "") + f"<answer>{answer}</answer>"
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


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
