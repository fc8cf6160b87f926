"""What a change to chartrl's code reruns, asked of Snakemake's own dry run (``chartrl reruns``) on a complete
results folder of the smoke overlay, in a copy of the repository (its own chartrl, by PYTHONPATH): the table in
docs/running.md ("What a code change reruns") is what the DAG says, row by row; a comment or a docstring anywhere,
a ``touch`` of every file and a checkout moved elsewhere rerun nothing; results recorded before the code was
fingerprinted are adopted by ``snakemake --touch`` (docs/running.md, "Results from before").

The results folder holds empty files recorded as made (tests/complete_results.py): no job runs."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import BIN, REPO, job_environment

pytestmark = pytest.mark.slow

SMOKE = "config/smoke.yaml"
COPIED = ("Snakefile", "rules", "workflow", "config", "envs", "profiles", "src", "tests/complete_results.py")
DOCS = REPO / "docs" / "running.md"
TABLE_TITLE = "### What a code change reruns"


def environment(checkout: Path) -> dict[str, str]:
    """A shell's environment in ``checkout``: its chartrl, the environment's commands, no forkserver."""
    return job_environment(
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=str(checkout / "src"),
        CHARTRL_SOURCE=str(checkout),
        CHARTRL_FORKSERVER="off",
    )


def copy_checkout(target: Path) -> Path:
    for item in COPIED:
        source, destination = REPO / item, target / item
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
            shutil.copytree(source, destination, symlinks=True, ignore=ignore)
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
    (target / "tests" / "fixtures").symlink_to(REPO / "tests" / "fixtures")  # the real ChartQA sample
    return target


def reruns(checkout: Path, *args: str) -> dict[str, list[str]]:
    """``chartrl reruns`` of the smoke overlay in ``checkout``: job -> why it would run."""
    result = subprocess.run(
        [str(BIN / "chartrl"), "reruns", f"--configfile={SMOKE}", *args],
        cwd=checkout,
        env=environment(checkout),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    lines = result.stdout.strip().splitlines()
    assert lines and (lines[-1] == "nothing to be done" or lines[-1].endswith("jobs would run")), result.stdout
    if lines[-1] == "nothing to be done":
        return {}
    return dict(line.split(": ", 1) for line in lines[:-1])


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[Path, set[str]]:
    """A copy of the repository with a complete results folder of the smoke overlay, and its jobs."""
    checkout = copy_checkout(tmp_path_factory.mktemp("study") / "chartrl")
    result = subprocess.run(
        [sys.executable, "tests/complete_results.py", str(checkout), "Snakefile", SMOKE],
        cwd=checkout,
        env=environment(checkout),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-6000:]
    return checkout, set(json.loads(result.stdout.splitlines()[-1]))


@contextmanager
def edited(path: Path, change) -> Iterator[None]:
    """``path`` changed by ``change(text) -> text`` for the block, then restored (content and times)."""
    text, stat = path.read_text(), path.stat()
    path.write_text(change(text))
    try:
        yield
    finally:
        path.write_text(text)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def docs_table() -> list[tuple[str, str]]:
    """(a change to, reruns) of each row of docs/running.md's table "What a code change reruns"."""
    text = DOCS.read_text()
    section = text[text.index(TABLE_TITLE) :]
    section = section[: section.index("\n### ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| a change to")]
    return [tuple(cell.strip() for cell in row.strip("|").split(" | ")[:2]) for row in rows]


def named_jobs(text: str, jobs: set[str]) -> set[str]:
    """The jobs a list names: ``rule`` (all its jobs) or ``rule (a, b)`` (those), comma-separated."""
    found = set()
    for rule, names in re.findall(r"(\w+)(?: \(([^)]*)\))?(?:, |$)", text):
        of_rule = {job for job in jobs if job.split(" ")[0] == rule}
        chosen = {f"{rule} {name.strip()}" for name in names.split(",")} if names else of_rule
        assert of_rule and chosen <= of_rule, f"{text!r}: {rule} ({names}) names no job of the plan"
        found |= chosen
    return found


def expected(cell: str, jobs: set[str]) -> set[str]:
    """The jobs a cell of the reruns column names: nothing, every job, every job but a list, or a list."""
    if cell == "nothing":
        return set()
    if cell == "every job":
        return set(jobs)
    if cell.startswith("every job but "):
        return jobs - named_jobs(cell.removeprefix("every job but "), jobs)
    return named_jobs(cell, jobs)


def statement_added(text: str) -> str:
    """A behavioural change: one statement more (a template: one character more)."""
    return text + "\nCHANGED = 1\n"


SPECIAL_ROWS = ("a comment, a docstring", "`touch` of every file", "the checkout copied elsewhere")


def test_the_complete_folder_is_up_to_date(study):
    checkout, jobs = study
    assert len(jobs) == 62 and reruns(checkout) == {}


def test_each_file_change_in_the_docs_table_reruns_what_it_says(study):
    checkout, jobs = study
    rows = [(change, cell) for change, cell in docs_table() if not change.startswith(SPECIAL_ROWS)]
    assert len(rows) >= 15 and {"`report/build.py`", "`tracking.py`"} <= {change.split(" ")[0] for change, _ in rows}
    wrong = []
    for change, cell in rows:
        path = checkout / "src" / "chartrl" / re.match(r"`([^`]+)`", change).group(1)
        with edited(path, statement_added if path.suffix == ".py" else lambda text: text + " "):
            found = set(reruns(checkout))
        if found != expected(cell, jobs):
            wrong.append(f"{change}: reruns {sorted(found)}, the table says {sorted(expected(cell, jobs))}")
    assert not wrong, "\n".join(wrong)


def test_the_v2_reward_reruns_its_series_their_evaluations_diagonals_and_the_report(study):
    """The issue's case, named here as well as in the docs: the v2 series (e6, e7) and what reads them."""
    checkout, _ = study
    with edited(checkout / "src/chartrl/rewards/definitions/v2.py", statement_added):
        found = reruns(checkout)
    assert set(found) == {
        "train e6", "train e7", "test_accuracy e6", "test_accuracy e7", "test_curve e6", "generate e8",
        "score e8 rule", "score e9 judge", "matrix_score e8 panel", "diagonal e9", "report",
    }  # fmt: skip
    assert found["train e6"] == "code: rewards/definitions/v2.py changed"  # why, as chartrl reruns says it
    assert found["generate e8"] == "after train e6"


def test_a_comment_or_a_docstring_in_every_module_reruns_nothing(study):
    checkout, _ = study
    modules = sorted((checkout / "src" / "chartrl").rglob("*.py"))
    saved = {path: (path.read_text(), path.stat()) for path in modules}
    try:
        for path in modules:
            text = path.read_text()
            tree = ast.parse(text)
            docstring = ast.get_docstring(tree, clean=False)
            if docstring:  # a word more in the module's docstring
                line = tree.body[0].lineno - 1
                lines = text.splitlines(keepends=True)
                lines[line] = lines[line].replace('"""', '"""Edited. ', 1)
                text = "".join(lines)
            path.write_text("# a comment first\n" + text.replace("\n\n\n", "\n\n\n\n", 1) + "# and last\n")
        assert reruns(checkout) == {}
    finally:
        for path, (text, stat) in saved.items():
            path.write_text(text)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_touching_every_file_reruns_nothing(study):
    checkout, _ = study
    for path in (checkout / "src").rglob("*"):
        os.utime(path)
    assert reruns(checkout) == {}


def test_a_checkout_moved_with_its_results_has_nothing_to_do(study, tmp_path):
    checkout, _ = study
    moved = tmp_path / "elsewhere" / "chartrl"
    shutil.copytree(checkout, moved, symlinks=True)  # as cp -a: times kept
    assert reruns(moved) == {}
    result = subprocess.run(
        [str(BIN / "snakemake"), "-n", f"--configfile={SMOKE}"],
        cwd=moved,
        env=environment(moved),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0 and "Nothing to be done" in result.stdout + result.stderr, result.stdout[-3000:]


def without_fingerprints(workdir: Path, source: Path) -> int:
    """Snakemake's records of ``workdir`` as a run made before code fingerprints left them: no ``code`` param, and
    chartrl's source files among the inputs (as absolute paths). How many records."""
    records = sorted((workdir / ".snakemake" / "metadata").iterdir())
    for path in records:
        record = json.loads(path.read_text())
        record["params"] = [param for param in record["params"] if not param.startswith("\'{\"code\": ")]
        record["input"] = sorted([*record["input"], str(source / "answers.py"), str(source / "config" / "load.py")])
        path.write_text(json.dumps(record))
    return len(records)


def test_results_from_before_are_adopted_by_snakemake_touch(study, tmp_path):
    checkout, jobs = study
    old = tmp_path / "old" / "chartrl"
    shutil.copytree(checkout, old, symlinks=True)
    assert without_fingerprints(old, old / "src" / "chartrl") >= len(jobs)
    before = reruns(old)
    assert set(before) == jobs
    # every job reruns, for want of a record of its code (or after a job that does): no config key, no code changed
    allowed = ("code: no fingerprint recorded", "input no longer read: ", "after ")
    unexpected = {job: why for job, why in before.items() if not all(r.startswith(allowed) for r in why.split("; "))}
    assert not unexpected, unexpected
    assert before["data_split synthchart train"].startswith("code: no fingerprint recorded")
    result = subprocess.run(
        [str(BIN / "snakemake"), "--touch", "--cores", "1", f"--configfile={SMOKE}"],
        cwd=old,
        env=environment(old),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert reruns(old) == {}  # adopted
    with edited(old / "src/chartrl/report/build.py", statement_added):  # and the fingerprints recorded are real
        assert set(reruns(old)) == {"report"}
