"""``chartrl rollout``: roll a policy out on a split and write generations plus a gallery, for people."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from chartrl.commands.spec import Reads, read_job_spec
from chartrl.config import PromptConfig, RolloutConfig, tools_config
from chartrl.data.contract import read_split
from chartrl.model.policy import load_policy
from chartrl.rollout.episodes import run_episodes
from chartrl.rollout.generations import draw_gallery, write_generations
from chartrl.rollout.sampling import SamplingParams
from chartrl.rollout.statistics import rollout_statistics
from chartrl.threads import use_threads

log = logging.getLogger(__name__)
READS = {"rollout": Reads("rollout", sections=("prompts", "tools", "rollout"))}


def cmd_rollout(args: argparse.Namespace) -> int:
    import torch

    sections = read_job_spec(args.spec, READS["rollout"])
    rollout = RolloutConfig(**sections["rollout"])
    torch.manual_seed(args.seed)
    if args.threads:
        use_threads(args.threads)
    policy = load_policy(args.model)
    rows = read_split(args.data)[: args.limit] if args.limit else read_split(args.data)
    params = SamplingParams(
        temperature=rollout.temperature,
        top_p=rollout.top_p,
        max_new_tokens=rollout.max_new_tokens,
        greedy=args.greedy,
        kv_reuse=rollout.kv_reuse,
    )
    episodes = run_episodes(
        policy,
        rows,
        with_tools=not args.no_tools,
        n=args.n,
        params=params,
        prompt_config=PromptConfig(**sections["prompts"]),
        tools=tools_config(sections["tools"]),
        batch_size=rollout.batch_size,
    )
    out = Path(args.out)
    write_generations(episodes, out, out.with_suffix(".images"), str(args.model))
    gallery = Path(args.gallery) if args.gallery else out.with_suffix(".gallery.png")
    draw_gallery(episodes, gallery)
    print(json.dumps(rollout_statistics(episodes)))
    log.info("%d generations written to %s, gallery %s", len(episodes), out, gallery)
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    rollout = stages.add_parser("rollout", help="roll a policy out on a split: generations + gallery")
    rollout.add_argument("--model", required=True, help="model folder")
    rollout.add_argument("--data", required=True, help="a split parquet in the data contract")
    rollout.add_argument("--n", type=int, default=1, help="samples per question")
    rollout.add_argument("--out", required=True, help="generations parquet to write")
    rollout.add_argument("--gallery", default=None, help="PNG gallery (default: beside --out)")
    rollout.add_argument("--no-tools", action="store_true", help="the no-tool prompt, one pass")
    rollout.add_argument("--greedy", action="store_true", help="greedy decoding instead of sampling")
    rollout.add_argument("--limit", type=int, default=None, help="only the first N questions")
    rollout.add_argument("--seed", type=int, default=0)
    rollout.add_argument("--threads", type=int, default=None)
    rollout.add_argument("--spec", default=None, help="JSON with the prompts, tools and rollout sections")
    rollout.set_defaults(func=cmd_rollout)
