"""Shared fixtures. Tests never touch the network: the hub is switched off and caches live in a temp folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHARTQA_REAL = REPO / "tests" / "fixtures" / "chartqa_real"
BIN = Path(sys.executable).parent

# Two workers (`make test`) on a two-core machine: every torch computation of every test and job takes one thread
# (chartrl.threads; OMP_NUM_THREADS for what sets none), since two jobs of two threads side by side run several
# times slower than two of one. Alone (TEST_WORKERS=0) they take what their configs say.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKERS > 1:
    _threads = str(max(1, (os.cpu_count() or 1) // WORKERS))
    os.environ.setdefault("CHARTRL_MAX_THREADS", _threads)
    os.environ.setdefault("OMP_NUM_THREADS", _threads)


def _fuzz_share() -> float:
    value = os.environ.get("CHARTRL_FUZZ_SHARE", "1")
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if not 0 < share <= 1:
        raise pytest.UsageError(f"CHARTRL_FUZZ_SHARE={value!r}: give a number in (0, 1], the share of examples drawn")
    return share


FUZZ_SHARE = _fuzz_share()
"""The share of each hypothesis test's examples a run draws: all of them in ``make test``; ``make test-fast``, the
inner loop, sets CHARTRL_FUZZ_SHARE=0.1 (hypothesis' database replays the failures it found before either way)."""


def examples(n: int, share: float = FUZZ_SHARE) -> int:
    """``max_examples`` for a hypothesis test that draws ``n`` in a full run: ``share`` of them (:data:`FUZZ_SHARE`),
    at least 100 (hypothesis' own default)."""
    return n if share == 1 else max(100, round(n * share))


@pytest.fixture(scope="session", autouse=True)
def offline_caches(tmp_path_factory):
    """Hugging Face libraries stay offline and write their caches to a temp folder; the workflow's forkservers
    (chartrl.forkserver) keep their sockets and logs in one too, and are stopped at the end."""
    cache = tmp_path_factory.mktemp("hf-cache")
    forkservers = tmp_path_factory.mktemp("forkservers")
    names = ("HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_DATASETS_CACHE", "CHARTRL_FORKSERVER_DIR")
    saved = {k: os.environ.get(k) for k in names}
    os.environ.update(
        HF_HOME=str(cache),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_DATASETS_CACHE=str(cache / "datasets"),
        CHARTRL_FORKSERVER_DIR=str(forkservers),
    )
    yield
    stop_forkservers(forkservers)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def runs_a_program(args) -> bool:
    """Whether a subprocess's command runs a Python program of this environment: a console script (chartrl,
    snakemake, mlflow, hf) or ``python`` with a module or a script. ``python -c`` snippets (the symbolic checker's
    sandbox, import probes) and other tools (git, bash) are not programs in this sense: they take milliseconds."""
    import shlex

    argv = shlex.split(args) if isinstance(args, str) else [os.fspath(a) for a in args]
    if not argv or Path(argv[0]).parent != BIN:
        return False
    return not Path(argv[0]).name.startswith("python") or (len(argv) > 1 and argv[1] != "-c")


PROGRAMS = pytest.StashKey[list]()
"""The Python programs a test not marked slow started, in its setup (fixtures of any scope) or its call."""


@contextlib.contextmanager
def recording_programs(item):
    """Record in ``item.stash[PROGRAMS]`` each program (:func:`runs_a_program`) a subprocess starts meanwhile."""
    import multiprocessing.util

    started = item.stash.setdefault(PROGRAMS, [])
    init = subprocess.Popen.__init__
    spawn = multiprocessing.util.spawnv_passfds

    def recorded(self, args, *rest, **kwargs):
        if runs_a_program(args):
            started.append(args if isinstance(args, str) else " ".join(map(os.fspath, args)))
        init(self, args, *rest, **kwargs)

    def spawned(path, args, passfds):
        # multiprocessing's spawn and forkserver start methods exec a fresh interpreter past subprocess.Popen
        started.append("multiprocessing: " + " ".join(map(os.fsdecode, args)))
        return spawn(path, args, passfds)

    subprocess.Popen.__init__ = recorded
    multiprocessing.util.spawnv_passfds = spawned
    try:
        yield
    finally:
        subprocess.Popen.__init__ = init
        multiprocessing.util.spawnv_passfds = spawn


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """pyproject's ``slow`` marker is for a test that runs Snakemake, a subprocess or a training end to end, which
    ``make test-fast`` leaves out: programs started by the fixtures a test sets up count as its own."""
    if item.get_closest_marker("slow"):
        return (yield)
    with recording_programs(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test without the ``slow`` marker that started a Python program of this environment (in its call or its
    fixtures' setup) fails, naming the command: each such program pays a fresh interpreter's imports, and the inner
    loop stays what the Makefile says it is."""
    if item.get_closest_marker("slow"):
        return (yield)
    with recording_programs(item):
        result = yield
    started = item.stash.get(PROGRAMS, [])
    if started:
        pytest.fail(
            f"started {len(started)} program(s) without the slow marker (the first: {started[0][:200]}): mark the "
            "test @pytest.mark.slow (make test-fast leaves out what runs a program end to end)",
            pytrace=False,
        )
    return result


@contextlib.contextmanager
def mlflow_server(store_uri: str, folder: Path):
    """``mlflow server`` on ``store_uri``, on a free loopback port, in a process group of its own (its workers with
    it), logging to ``folder/server.log``; yields its address once ``/health`` answers, stops the group at the end."""
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open(folder / "server.log", "w")
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store_uri,
               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]  # fmt: skip
    process = subprocess.Popen(command, cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{address}/health", timeout=5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((folder / "server.log").read_text()[-3000:]) from None
                time.sleep(1)
        yield address
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # its own session: the server and its workers, nothing else
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def stop_forkservers(folder: Path) -> None:
    """SIGTERM every forkserver with its socket in ``folder`` (they would exit on their own after idling)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
            if any(b"serve_forks" in a for a in args) and any(a.startswith(os.fsencode(folder)) for a in args):
                os.kill(int(cmdline.parent.name), signal.SIGTERM)
        except (OSError, ProcessLookupError):
            pass


def raw_default_config() -> dict:
    from chartrl.config import DEFAULT_CONFIG_FILES, read_config_files

    return read_config_files([REPO / f for f in DEFAULT_CONFIG_FILES])


def dataset_from(section: dict, name: str = "d"):
    """A DatasetConfig for ``section``, validated and defaulted by the real config loader."""
    from chartrl.config import parse_config

    raw = raw_default_config()
    raw["datasets"][name] = section
    raw["extra_datasets"] = [name]
    return parse_config(raw).datasets[name]


def job_environment(**variables: str) -> dict[str, str]:
    """This process's environment with ``variables``, for the workflow and ``chartrl`` runs a test starts, less
    PYTEST_CURRENT_TEST: pytest names the running test there, a user's shell has no such variable, and the
    forkservers (chartrl.forkserver) key their servers by the whole environment, so left in it would give each
    test's runs preloaded servers of their own instead of those an earlier test's runs started."""
    env = {**os.environ, **variables}
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def snakemake(workdir: Path, *args: str, check: bool = True, timeout: int = 900) -> subprocess.CompletedProcess:
    """Run the repository's workflow with ``workdir`` as working directory (results land there)."""
    env = job_environment(PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    cmd = [
        str(BIN / "snakemake"),
        "--snakefile",
        str(REPO / "Snakefile"),
        "--workflow-profile",
        str(REPO / "profiles" / "default"),
        "--directory",
        str(workdir),
        *args,
    ]
    result = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({result.returncode}):\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-6000:]}"
        )
    return result


def reuse_outputs(source: Path, workdir: Path, kept: tuple[str, ...]) -> None:
    """Copy a finished run's ``results/<kept>`` folders into ``workdir`` with Snakemake's records of them
    (``.snakemake``, locks left out): a run there finds those outputs up to date and plans none of their jobs."""
    shutil.copytree(source / ".snakemake", workdir / ".snakemake", ignore=shutil.ignore_patterns("locks"))
    for folder in kept:
        shutil.copytree(source / "results" / folder, workdir / "results" / folder)


def copy_chartqa_layout(dest: Path, charts: list[str] | None = None) -> Path:
    """Copy the real ChartQA sample (optionally only some charts) into ``dest`` in the original layout."""
    import json

    test_dir = dest / "test"
    (test_dir / "png").mkdir(parents=True)
    for name in ("test_human.json", "test_augmented.json"):
        records = json.loads((CHARTQA_REAL / "test" / name).read_text())
        if charts is not None:
            records = [r for r in records if r["imgname"] in charts]
        (test_dir / name).write_text(json.dumps(records))
    for png in (CHARTQA_REAL / "test" / "png").iterdir():
        if charts is None or png.name in charts:
            shutil.copy(png, test_dir / "png" / png.name)
    shutil.copy(CHARTQA_REAL / "test" / "refocus_chartqa_vcot_test.jsonl", test_dir)
    return dest


@pytest.fixture(scope="session")
def synth_rows():
    """A few synthetic charts of every style (train and val splits), rendered for real."""
    from chartrl.data.stage import collect_split

    dataset = dataset_from(
        {"source": "synthchart", "seed": 3, "splits": {"train": 24, "val": 8}, "questions_per_chart": 3}, name="synth"
    )
    return {split: collect_split(dataset, split, root=Path("."))[0] for split in ("train", "val")}


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """The tiny Qwen2.5-VL built by the real builder (random weights, seeded)."""
    from chartrl.config import load_config
    from chartrl.model.tiny import build_tiny_model

    config = load_config(root=REPO)
    out = tmp_path_factory.mktemp("models") / "tiny"
    build_tiny_model(out, config.model, list(config.tools.names))
    return out


@pytest.fixture(scope="session")
def tiny_policy(tiny_model_dir):
    from chartrl.model.policy import load_policy

    return load_policy(tiny_model_dir, threads=2)


@pytest.fixture(scope="session")
def default_config():
    from chartrl.config import load_config

    return load_config(root=REPO)


@pytest.fixture(scope="session")
def warm_model_dir(tiny_model_dir, synth_rows, default_config, tmp_path_factory):
    """The tiny model after a short warm start: it answers in the format, with some variety when sampled."""
    import dataclasses

    from chartrl.model.policy import load_policy
    from chartrl.warmstart.supervised import train_warmstart

    policy = load_policy(tiny_model_dir, threads=2, train=True)
    cfg = dataclasses.replace(
        default_config.warmstart, steps=24, batch_size=4, warmup_steps=4, lr=3e-3, perception_steps=0
    )
    train_warmstart(policy, synth_rows["train"], cfg, default_config.prompts, default_config.tools)
    out = tmp_path_factory.mktemp("models") / "warm"
    policy.model.save_pretrained(out)
    policy.processor.save_pretrained(out)
    return out


def find_chromium() -> str:
    """Debian's chromium for the browser tests; without it they skip, or fail where CHARTRL_REQUIRE_BROWSER is set
    (as .ci/run sets it)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("CHARTRL_REQUIRE_BROWSER"):
            raise AssertionError("chromium is required here (CHARTRL_REQUIRE_BROWSER is set); apt-get install chromium")
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    return chromium


def headless_chromium(chromium: str, profile: Path, window: str, budget_ms: int) -> list[str]:
    """The command line of a headless Chromium that reaches nothing beyond the page it is given, with its own
    profile folder, a window of ``window`` ("WIDTH,HEIGHT") and ``budget_ms`` of virtual time."""
    return [
        chromium,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--window-size={window}",
        f"--virtual-time-budget={budget_ms}",
    ]
