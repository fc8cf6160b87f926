"""Where the test suite's CPU time goes: a pytest plugin that charges the machine's busy CPU time to each test.

Wall time per test (``--durations``) says little on two workers, where every test shares the cores with another;
this counts what each test (its setup, call and teardown) made the whole machine do: the busy time of every core,
read from ``/proc/stat`` before and after, so the DAGs' subprocesses, forkservers and Ray heads a test starts are
charged to it too. That attribution only holds when nothing else runs, so the plugin refuses to run under
pytest-xdist workers; run the suite in one process on an idle machine::

    PYTHONPATH=bench SUITE_CPU_OUT=cpu.json TEST_WORKERS=0 make test PYTEST_ARGS="-p suite_cpu"

It writes ``SUITE_CPU_OUT`` (JSON: per test and per module, core-seconds busy and wall seconds) and prints the
modules that used the most. A session fixture's cost falls on the first test that asks for it; a process a test
leaves running (an idle forkserver) is charged to the tests that follow while it works.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

TICKS = os.sysconf("SC_CLK_TCK")
_records: list[dict] = []


def busy_seconds() -> float:
    """Core-seconds the machine spent busy since boot (every field of /proc/stat's cpu line but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / TICKS


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER") or getattr(config.option, "numprocesses", None):
        raise pytest.UsageError("suite_cpu charges the whole machine to each test: run it in one process (-n 0)")
    # bench/ was put on PYTHONPATH to load this plugin: the tests' subprocesses do not inherit it
    here = str(Path(__file__).resolve().parent)
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and str(Path(p).resolve()) != here]
    if kept:
        os.environ["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        os.environ.pop("PYTHONPATH", None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    busy, wall = busy_seconds(), time.monotonic()
    yield
    _records.append({"test": item.nodeid, "cpu_s": busy_seconds() - busy, "wall_s": time.monotonic() - wall})


def pytest_sessionfinish(session):
    if not _records:
        return
    modules: dict[str, dict[str, float]] = defaultdict(lambda: {"cpu_s": 0.0, "wall_s": 0.0, "tests": 0})
    for record in _records:
        module = modules[record["test"].split("::", 1)[0]]
        module["cpu_s"] += record["cpu_s"]
        module["wall_s"] += record["wall_s"]
        module["tests"] += 1
    ordered = dict(sorted(modules.items(), key=lambda kv: -kv[1]["cpu_s"]))
    total = {key: sum(m[key] for m in modules.values()) for key in ("cpu_s", "wall_s", "tests")}
    out = os.environ.get("SUITE_CPU_OUT")
    if out:
        Path(out).write_text(json.dumps({"total": total, "modules": ordered, "tests": _records}, indent=1))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"suite_cpu: {total['cpu_s']:.0f} core-s busy over {total['wall_s']:.0f} s of tests")
        for name, module in list(ordered.items())[:20]:
            reporter.write_line(f"  {module['cpu_s']:7.1f} core-s {module['wall_s']:7.1f} s  {name}")
