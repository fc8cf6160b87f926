"""``chartrl model tiny``: the embedded default's tiny Qwen2.5-VL-architecture model, random weights (the
base_model rule)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from chartrl.commands.spec import Reads, read_job_spec
from chartrl.config import model_config
from chartrl.model.tiny import build_tiny_model

READS = {
    # the tool names only: the tokenizer learns them as words
    "model tiny": Reads("model tiny", sections=("model",), keys={"tools": ("names",)}),
}


def cmd_tiny(args: argparse.Namespace) -> int:
    sections = read_job_spec(args.spec, READS["model tiny"])
    summary = build_tiny_model(
        Path(args.out), model_config(sections["model"]), list(sections["tools"]["names"]), seed=args.seed
    )
    print(json.dumps(summary))
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    model = stages.add_parser("model", help="build models")
    commands = model.add_subparsers(dest="command", required=True)
    tiny = commands.add_parser("tiny", help="build the tiny Qwen2.5-VL-architecture model (random weights)")
    tiny.add_argument("--out", required=True, help="Hugging Face model folder to write")
    tiny.add_argument("--seed", type=int, default=None, help="overrides model.tiny.seed")
    tiny.add_argument("--spec", default=None, help="JSON with the model and tools sections (defaults otherwise)")
    tiny.set_defaults(func=cmd_tiny)
