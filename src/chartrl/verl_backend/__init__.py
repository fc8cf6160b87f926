"""The verl backend: chartrl's series run by verl (``python -m verl.trainer.main_ppo``) on a Ray cluster.

- chartrl.verl_backend.hydra        Hydra override syntax for Python values (``key=value`` strings)
- chartrl.verl_backend.snapshot     model.revision: the pinned commit's snapshot folder every verl worker loads
- chartrl.verl_backend.overrides    series config -> the Hydra overrides of one train job, one generation job
- chartrl.verl_backend.checks       batch divisibility and sizes, before anything launches
- chartrl.verl_backend.architectures  a policy's sizes (known hub ids, a local folder, the tiny model)
- chartrl.verl_backend.memory       a job's peak GPU memory per phase, and what to change when it does not fit
- chartrl.verl_backend.gpu_hours    a job's GPU-hours from the tokens its trajectories hold: central and range
- chartrl.verl_backend.budget       every GPU job's memory, GPU-hours, checkpoint disk and judge calls
- chartrl.verl_backend.tools        our tools as verl BaseTools (imports verl)
- chartrl.verl_backend.agent_loop   verl's tool agent loop with each pass capped (imports verl)
- chartrl.verl_backend.tool_config  the verl tool YAML and each sample's tools_kwargs
- chartrl.verl_backend.data         our parquet contract -> verl's RL dataset parquet
- chartrl.verl_backend.trajectory   verl's decoded response text -> assistant turns, observations, tool outcome
- chartrl.verl_backend.generations  verl's validation dumps -> our generations contract
- chartrl.verl_backend.checkpoints  verl's FSDP checkpoints: find one, merge it to Hugging Face format
- chartrl.verl_backend.metrics      the series' MLflow run -> results/runs/{series}/metrics.jsonl
- chartrl.verl_backend.job          ``chartrl verl train``: prepare, run main_ppo, export, write run.json

verl itself cannot run on the CPU (no CPU platform for its FSDP engine, rollouts need vLLM/SGLang), so this
package is validated on the CPU through verl's own config schema and loaders: the overrides compose against the
installed ``ppo_trainer`` config and convert to verl's dataclasses, the data loads with ``RLHFDataset``, our tools
and rewards load through verl's registries, the model merger runs on a checkpoint in verl's layout.
"""
