"""Benchmarks of chartrl, written to bench/results.md (`make bench`).

Each figure is measured in this one run, repeated, reported as min / median / max, and, where the issue names a
peer, side by side with it as a ratio. Nothing here is asserted: speed is reported, not tested. Each stage has a
module ``bench/bench_<stage>.py`` with ``sections(args) -> list[str]`` (Markdown lines).
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
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
