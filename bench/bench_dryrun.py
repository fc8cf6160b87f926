"""What planning costs: `snakemake -n` of one commit against another, in one run on one machine, alternating.

    python bench/bench_dryrun.py --before COMMIT [--after COMMIT] [--repeats 5] [--out bench/dryrun_timings.md]

Each commit is extracted with `git archive` into a folder of its own and imported from there (PYTHONPATH), so the
two share this environment and nothing else. For each config (the embedded default, `config/gpu.yaml`) and each
commit, two working folders: an empty one (Snakemake plans every job) and a complete one (every output present and
recorded as made, by tests/complete_results.py: what `snakemake -n` checks after a finished `make run`). The first
dry run in a folder is reported apart (it writes chartrl's cache of parsed modules, `.snakemake/chartrl/`); then
`--repeats` dry runs per folder, the two commits alternating, and the median and the fastest are reported.
One row per config and folder is appended to `--out`, with both commits, the date, the CPU, the load average and
how many jobs each dry run plans (none in a complete folder).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CONFIGS = {"default": [], "gpu": ["config/gpu.yaml"]}
HEADER = (
    "| before | after | date | CPU | load | config | results folder | jobs planned (before, after) "
    "| before: first, median, fastest (s) | after: first, median, fastest (s) |\n"
    "|---|---|---|---|---|---|---|---|---|---|\n"
)


INTRO = """# `snakemake -n` timings

What planning costs, before and after a change, measured in one run on one machine (`bench/bench_dryrun.py`, its
docstring says how). Seconds of wall time of `snakemake -n -q`: first, the first dry run in a fresh folder (for a
commit with code fingerprints, before chartrl's cache of parsed modules exists); then the median and the fastest of
the repeats, the two commits alternating. Jobs planned: in an empty folder every job; in a complete one (every
output present and recorded as made), none. Load: the machine's load average (1, 5, 15 min) at the end of the row's
runs: other work shared the machine.

"""


def cpu() -> str:
    """'2 cores, AMD EPYC family 26 model 2', from /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model = f"{fields.get('model name', '?')} family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"
    return f"{os.cpu_count()} cores, {model}"


def extract(commit: str, target: Path) -> str:
    """The commit's tree in ``target``; its short hash."""
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", commit], capture_output=True, text=True, check=True
    ).stdout.strip()


def environment(tree: Path) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(tree / "src")}
    env.update(CHARTRL_SOURCE=str(tree), CHARTRL_FORKSERVER="off")
    return env


def dry_run(tree: Path, workdir: Path, configfiles: list[str], quiet: bool = True) -> tuple[float, str]:
    """Seconds of one `snakemake -n` (the workflow's own profile, as a user's run reads it), and its output."""
    command = [str(BIN / "snakemake"), "-n", *(["-q"] if quiet else []), "--snakefile", str(tree / "Snakefile")]
    command += ["--directory", str(workdir), *(f"--configfile={tree / path}" for path in configfiles)]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=workdir, env=environment(tree), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"snakemake -n failed in {workdir}:\n{result.stderr[-3000:]}")
    return elapsed, result.stdout + result.stderr


def planned(output: str) -> int:
    """How many jobs a dry run's output plans (its job table's total; none when nothing is to be done)."""
    match = re.search(r"^total\s+(\d+)$", output, re.MULTILINE)
    return int(match.group(1)) if match else 0


def complete(tree: Path, workdir: Path, configfiles: list[str]) -> None:
    """Every output of the DAG present and recorded (tests/complete_results.py of this checkout). The `--touch`
    runs no job, but a commit's workflow may check at start what its jobs would need: a GPU limit for verl jobs, and
    a local Ray head unless a cluster is named (it is never called)."""
    script = REPO / "tests" / "complete_results.py"
    command = [sys.executable, str(script), str(workdir), str(tree / "Snakefile")]
    command += [*(str(tree / path) for path in configfiles), "--", "--resources", "gpu=100000"]
    env = {**environment(tree), "RAY_ADDRESS": "http://127.0.0.1:8265"}
    subprocess.run(command, cwd=workdir, env=env, check=True, capture_output=True, timeout=1800)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--after", default="HEAD", help="the commit measured (default: HEAD)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(REPO / "bench" / "dryrun_timings.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-dryrun-") as scratch:
        root = Path(scratch)
        trees = {side: root / side for side in ("before", "after")}
        names = {side: extract(getattr(args, side), trees[side]) for side in trees}
        rows = []
        for config, files in CONFIGS.items():
            for folder in ("empty", "complete"):
                workdirs = {side: root / "work" / config / folder / side for side in trees}
                for side, workdir in workdirs.items():
                    workdir.mkdir(parents=True)
                    if folder == "complete":
                        complete(trees[side], workdir, files)
                first = {side: dry_run(trees[side], workdirs[side], files)[0] for side in trees}
                times: dict[str, list[float]] = {side: [] for side in trees}
                for _ in range(args.repeats):
                    for side in trees:
                        times[side].append(dry_run(trees[side], workdirs[side], files)[0])
                jobs = {side: planned(dry_run(trees[side], workdirs[side], files, quiet=False)[1]) for side in trees}
                cells = {
                    side: f"{first[side]:.2f}, {statistics.median(times[side]):.2f}, {min(times[side]):.2f}"
                    for side in trees
                }
                load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
                commits = f"| `{names['before']}` | `{names['after']}` | {datetime.date.today()} | {cpu()} | {load} "
                jobs_cell = f"{jobs['before']}, {jobs['after']}"
                rows.append(f"{commits}| {config} | {folder} | {jobs_cell} | {cells['before']} | {cells['after']} |\n")
                print(rows[-1], end="", flush=True)
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    if HEADER not in text:
        text += INTRO + HEADER
    out.write_text(text + "".join(rows))


if __name__ == "__main__":
    main()
