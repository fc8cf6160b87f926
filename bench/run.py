"""Benchmarks of chartrl, written to bench/results.md (`make bench`).

Each figure is measured in this one run, repeated, reported as min / median / max, and, where the issue names a
peer, side by side with it as a ratio. Nothing here is asserted: speed is reported, not tested. Each stage has a
module ``bench/bench_<stage>.py`` with ``sections(args) -> list[str]`` (Markdown lines). With ``--only``, the
sections those modules write replace the sections of the same ``## `` heading in the existing file (the others and
its opening stay); a new heading is added at the end.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO  # noqa: E402

MODULES = (
    "bench_data",
    "bench_tools",
    "bench_rewards",
    "bench_published_metric",
    "bench_rollout",
    "bench_kv_reuse",
    "bench_cache",
    "bench_vision",
    "bench_train",
    "bench_step",
    "bench_learning",
    "bench_precision",
    "bench_verl",
)


def level2(text: str) -> list[tuple[str, str]]:
    """``(heading, block)`` for each ``## `` section of ``text`` (its heading line to the next ``## ``); the text
    before the first comes first with the heading ``""``."""
    blocks: list[tuple[str, str]] = [("", "")]
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            blocks.append((line.strip(), ""))
        heading, block = blocks[-1]
        blocks[-1] = (heading, block + line)
    return blocks


def merged(existing: str, new: str) -> str:
    """``existing`` with each ``## `` section of ``new`` in place of the one of the same heading, or added at the
    end; ``new``'s text before its first section is left out."""
    replacement = {heading: block.rstrip("\n") + "\n\n" for heading, block in level2(new) if heading}
    kept = [replacement.pop(heading, block) for heading, block in level2(existing)]
    blocks = [block.rstrip("\n") + "\n\n" for block in kept + list(replacement.values()) if block]
    return "".join(blocks).rstrip("\n") + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "bench" / "results.md"))
    parser.add_argument("--charts", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--responses", type=int, default=10_000, help="responses for the rule-vs-mathruler benchmark")
    parser.add_argument("--judge-items", type=int, default=256, help="items per judge-throughput run")
    parser.add_argument("--only", nargs="*", default=None, help="run only these modules (e.g. bench_data)")
    args = parser.parse_args()
    lines = [
        "# chartrl benchmarks",
        "",
        f"`make bench` on {platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}.",
        "",
    ]
    for name in args.only or MODULES:
        lines += importlib.import_module(name).sections(args)
    text, out = "\n".join(lines), Path(args.out)
    if args.only and out.exists():  # some sections: the file's other sections stay as they were measured
        text = merged(out.read_text(), text)
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
