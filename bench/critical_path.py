"""The critical path of a finished Snakemake run: what set its wall time, and where cores stood idle.

Reads a run's Snakemake log (default: the newest in .snakemake/log/): every job's rule, wildcards, inputs,
outputs, threads, start and finish. A job depends on the jobs whose outputs it reads. Prints

- the wall time, the busy core-seconds (each job's wall time x its threads) and the idle core-seconds on the
  run's cores;
- the critical path: the chain of dependent jobs with the longest summed wall time, each job with its share. No
  schedule on any number of cores finishes before it;
- the bound on the run's cores: the larger of that path and the busy core-seconds over the cores;
- the stretches of the run when fewer threads were busy than there were cores, longest first.

    python bench/critical_path.py [--log .snakemake/log/....snakemake.log] [--cores 2]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
RULE = re.compile(r"^(?:local)?rule (\S+):$")
FINISHED = re.compile(r"^Finished jobid: (\d+)")


@dataclass
class Job:
    jobid: int
    rule: str
    start: float
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    wildcards: str = ""
    threads: int = 1
    end: float | None = None

    @property
    def seconds(self) -> float:
        return (self.end or self.start) - self.start

    @property
    def name(self) -> str:
        return f"{self.rule}[{self.wildcards}]" if self.wildcards else self.rule


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def parse(log: Path) -> list[Job]:
    jobs: dict[int, Job] = {}
    stamp = None
    current: dict | None = None

    def close() -> None:
        nonlocal current
        if current and "jobid" in current:
            jobs[current["jobid"]] = Job(
                jobid=current["jobid"],
                rule=current["rule"],
                start=current["start"],
                inputs=current.get("input", []),
                outputs=current.get("output", []),
                wildcards=current.get("wildcards", ""),
                threads=current.get("threads", 1),
            )
        current = None

    for line in log.read_text().splitlines():
        if match := STAMP.match(line):
            close()
            stamp = time.mktime(time.strptime(match.group(1), "%a %b %d %H:%M:%S %Y"))
            continue
        if match := RULE.match(line):
            close()
            current = {"rule": match.group(1), "start": stamp}
            continue
        if match := FINISHED.match(line):
            close()
            if int(match.group(1)) in jobs:
                jobs[int(match.group(1))].end = stamp
            continue
        if current is not None and line.startswith("    ") and ": " in line:
            key, value = line.strip().split(": ", 1)
            if key in ("input", "output"):
                current[key] = _split(value)
            elif key == "jobid":
                current["jobid"] = int(value)
            elif key == "wildcards":
                current["wildcards"] = value
            elif key == "threads":
                current["threads"] = int(value)
        elif current is not None and not line.startswith("    "):
            close()
    close()
    return [job for job in jobs.values() if job.end is not None]


def dependencies(jobs: list[Job]) -> dict[int, list[int]]:
    """jobid -> the jobids whose outputs it reads (an output folder counts for the files under it)."""
    producer: dict[str, int] = {}
    for job in jobs:
        for output in job.outputs:
            producer[output.rstrip("/")] = job.jobid
    deps: dict[int, list[int]] = {}
    for job in jobs:
        found = set()
        for path in job.inputs:
            path = path.rstrip("/")
            parts = path.split("/")
            for end in range(len(parts), 0, -1):  # the file, or a folder output above it
                source = producer.get("/".join(parts[:end]))
                if source is not None and source != job.jobid:
                    found.add(source)
                    break
        deps[job.jobid] = sorted(found)
    return deps


def critical_path(jobs: list[Job], deps: dict[int, list[int]]) -> list[Job]:
    by_id = {job.jobid: job for job in jobs}
    longest: dict[int, float] = {}
    through: dict[int, int | None] = {}
    for job in sorted(jobs, key=lambda j: j.start):  # a job starts after the jobs it reads
        best, best_dep = 0.0, None
        for dep in deps[job.jobid]:
            if dep in longest and longest[dep] > best:
                best, best_dep = longest[dep], dep
        longest[job.jobid] = best + job.seconds
        through[job.jobid] = best_dep
    last = max(longest, key=longest.get)
    path = []
    while last is not None:
        path.append(by_id[last])
        last = through[last]
    return path[::-1]


def idle_stretches(jobs: list[Job], cores: int) -> list[tuple[float, float, int]]:
    """(start, end, busy threads) of each stretch with fewer busy threads than cores."""
    events = sorted({job.start for job in jobs} | {job.end for job in jobs})
    stretches = []
    for a, b in zip(events, events[1:], strict=False):
        busy = sum(min(job.threads, cores) for job in jobs if job.start <= a and job.end >= b and job.end > job.start)
        if busy < cores and b > a:
            if stretches and stretches[-1][1] == a and stretches[-1][2] == busy:
                stretches[-1] = (stretches[-1][0], b, busy)
            else:
                stretches.append((a, b, busy))
    return stretches


def report(jobs: list[Job], cores: int, log: Path) -> list[str]:
    deps = dependencies(jobs)
    start, end = min(j.start for j in jobs), max(j.end for j in jobs)
    wall = end - start
    busy = sum(job.seconds * min(job.threads, cores) for job in jobs)
    path = critical_path(jobs, deps)
    path_seconds = sum(job.seconds for job in path)
    lines = [
        f"Snakemake log: {log}",
        f"{len(jobs)} jobs, wall {wall:.0f} s on {cores} cores; busy {busy:.0f} core-s, idle {cores * wall - busy:.0f}"
        f" core-s ({(cores * wall - busy) / (cores * wall):.0%}).",
        f"Bound on {cores} cores: {max(path_seconds, busy / cores):.0f} s (critical path {path_seconds:.0f} s, busy "
        f"core-s / cores {busy / cores:.0f} s). Log times are whole seconds.",
        "",
        "Critical path (dependencies only):",
        "",
        "| job | threads | started (s) | wall (s) | share of the path |",
        "|---|---|---|---|---|",
    ]
    for job in path:
        lines.append(
            f"| {job.name} | {job.threads} | {job.start - start:.0f} | {job.seconds:.0f} | "
            f"{job.seconds / max(path_seconds, 1):.0%} |"
        )
    stretches = sorted(idle_stretches(jobs, cores), key=lambda s: s[0] - s[1])
    lines += ["", f"Stretches with fewer than {cores} threads busy (longest first):", ""]
    lines += ["| from (s) | to (s) | busy threads | running |", "|---|---|---|---|"]
    for a, b, threads in stretches[:10]:
        running = [job.name for job in jobs if job.start <= a and job.end >= b and job.end > job.start]
        lines.append(f"| {a - start:.0f} | {b - start:.0f} | {threads} | {', '.join(running) or '-'} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--log", type=Path, default=None, help="a Snakemake log (default: the newest in .snakemake/log)"
    )
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args(argv)
    log = args.log
    if log is None:
        logs = sorted(Path(".snakemake/log").glob("*.snakemake.log"))
        if not logs:
            print("no Snakemake log in .snakemake/log: run the workflow first, or pass --log", file=sys.stderr)
            return 2
        log = logs[-1]
    jobs = parse(log)
    if not jobs:
        print(f"{log}: no finished job in this log (a dry run, or a run that did nothing)", file=sys.stderr)
        return 2
    print("\n".join(report(jobs, args.cores, log)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
