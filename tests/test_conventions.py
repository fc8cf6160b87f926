"""Snakemake conventions a user expects, read from the rule files and the documentation: every rule has a log and
a benchmark, the judge-bound score rule declares its memory and retries, Snakemake finds the workflow profile
(``profiles/default``) without a flag, and every documented ``snakemake`` command (README, docs/, the Makefile, the
configs' and profiles' comments) parses as written and names files that exist."""

from __future__ import annotations

import os
import re
import shlex

import pytest

from conftest import BIN, PROGRAMS, REPO, _fuzz_share, examples, recording_programs, runs_a_program

RULE = re.compile(r"^( *)(?:rule|checkpoint) (\w+):\n((?:\1 {4}.*\n|\s*\n)*)", re.MULTILINE)


def rules() -> dict[str, str]:
    """Every rule's body by name (a rule defined once per backend is checked in both forms)."""
    found: dict[str, str] = {}
    for path in sorted((REPO / "rules").glob("*.smk")):
        for match in RULE.finditer(path.read_text()):
            found[f"{path.name}:{match.group(2)}:{match.start()}"] = match.group(3)
    return found


def test_the_rule_files_hold_every_rule():
    names = {key.split(":")[1] for key in rules()}
    assert {"data_split", "data_card", "train", "generate", "score", "diagonal", "report"} <= names


@pytest.mark.parametrize("rule", sorted(rules()))
def test_every_rule_has_a_log_and_a_benchmark(rule):
    body = rules()[rule]
    assert re.search(r"^\s+log:", body, re.MULTILINE), f"{rule} has no log:"
    assert re.search(r"^\s+benchmark:\s*\n\s+\"results/benchmarks/", body, re.MULTILINE), f"{rule} has no benchmark:"


def test_the_judge_bound_score_rule_declares_memory_and_retries():
    [body] = [body for key, body in rules().items() if key.split(":")[1] == "score"]
    assert re.search(r"^\s+retries: [1-9]", body, re.MULTILINE)
    assert re.search(r"^\s+resources:\s*\n\s+mem_mb=", body, re.MULTILINE)


DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Files a documented command names that the user writes: the site overlay of docs/cluster.md, its copy of a profile,
# the overlay training the new reward of docs/rewards.md.
USER_FILES = {"site.yaml", "my-slurm", "e15.yaml"}


def documented_commands() -> list[tuple[str, str]]:
    """``snakemake`` commands that run the workflow (``--cores``, a dry run, a profile), as the docs and comments write
    them, a command continued with a backslash joined into one line."""
    files = [*DOCUMENTS, REPO / "Makefile", *sorted((REPO / "config").glob("*.yaml"))]
    files += sorted((REPO / "profiles").glob("*/*.yaml"))
    commands = []
    for path in files:
        text = re.sub(r"\\\n[ #]*", " ", path.read_text())
        text = text.replace("$(SNAKEMAKE)", "snakemake").replace("$(CORES)", "all")  # the Makefile's variables
        for line in text.splitlines():
            for command in re.findall(r"\bsnakemake (?:[^`#\n]*)", line):
                if re.search(r"--cores|(?:^| )-n\b|--workflow-profile|--profile", command):
                    commands.append((str(path.relative_to(REPO)), command.strip()))
    return commands


def test_the_documents_give_commands():
    where = {path for path, _ in documented_commands()}
    assert len(documented_commands()) > 10
    assert {"README.md", "docs/cluster.md", "Makefile"} <= where


def test_snakemake_finds_the_default_profile_without_a_flag(tmp_path, monkeypatch, capsys):
    """Snakemake 9 reads ``profiles/default`` beside the Snakefile: the profile's settings hold with no flag."""
    from snakemake.cli import parse_args

    monkeypatch.chdir(tmp_path)
    _, args = parse_args(["--snakefile", str(REPO / "Snakefile"), "-n"])
    assert "workflow specific profile" in capsys.readouterr().err
    assert args.printshellcmds and args.rerun_incomplete and args.latency_wait == 10
    assert "gpu" in args.resources  # the local GPU limit, 0 by default


@pytest.mark.parametrize("where,command", documented_commands())
def test_every_documented_command_runs_as_written(where, command):
    """Each command parses with Snakemake's own argument parser, and the profiles and config files it names exist
    (the default profile is never passed: Snakemake reads it on its own)."""
    from snakemake.cli import get_argument_parser

    assert "workflow/profiles" not in command and "profiles/default" not in command, f"{where}: {command}"
    words = shlex.split(command)[1:]
    args = get_argument_parser().parse_args(words)
    named = [*(args.configfile or []), *([args.workflow_profile] if args.workflow_profile else [])]
    named += [*(args.profile or [])]
    for name in map(str, named):
        assert name in USER_FILES or (REPO / name).exists(), f"{where}: {command} names {name}, which does not exist"


def test_no_document_points_outside_the_repository():
    outside = "/".join(("..", "shared"))  # spelled in parts, so that this file does not point there itself
    for path in [*DOCUMENTS, REPO / "Makefile", REPO / ".ci" / "run"]:
        assert outside not in path.read_text(), path


def test_test_modules_have_distinct_names():
    """pytest imports test modules by basename (the folders have no __init__.py): two files of one name stop the
    suite at collection."""
    names: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}


def anchors(text: str) -> set[str]:
    """GitHub's anchors for a Markdown file's headings (code blocks aside; a repeated heading gets -1, -2, ...)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        name, n = slug, 0
        while name in found:
            n += 1
            name = f"{slug}-{n}"
        found.add(name)
    return found


@pytest.mark.parametrize("path", [*DOCUMENTS, REPO / "bench" / "make_run_timings.md"], ids=lambda p: p.name)
def test_every_relative_link_resolves(path):
    """Each link to a file of the repository names one that exists, and each #anchor a heading of that file."""
    text = path.read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{path.name}: {target}"
        assert REPO in linked.parents or linked == REPO, f"{path.name}: {target} points outside the repository"
        if anchor:
            assert anchor in anchors(linked.read_text()), f"{path.name}: {target}: no such heading"


def test_the_readme_is_for_users():
    """At most 250 lines, and no commit hash or date in it: measurements live in docs/results.md and bench/, each
    headed by its commit, date and machine; history lives in git."""
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 250
    commit = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
    date = re.compile(r"\b(19|20)\d\d-\d\d-\d\d\b")
    assert [line for line in lines if commit.search(line) or date.search(line)] == []


def shell_lines() -> list[tuple[str, str]]:
    """Each command line of the ```bash blocks of the README and docs/, a backslash continuation joined, a program
    of ``.venv`` named without its folder (docs/cluster.md writes ``.venv/bin/chartrl``)."""
    found = []
    for path in DOCUMENTS:
        for block in re.findall(r"^```(?:bash|sh)\n(.*?)^```", path.read_text(), re.MULTILINE | re.DOTALL):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    found.append((str(path.relative_to(REPO)), re.sub(r"^\.venv/bin/", "", line.strip())))
    return found


@pytest.mark.parametrize("where,line", [item for item in shell_lines() if item[1].startswith(("chartrl ", "make "))])
def test_every_documented_chartrl_and_make_command_parses(where, line):
    """A ``chartrl`` command parses with chartrl's own parser and names config files that exist; a ``make`` command
    names targets of the Makefile."""
    words = shlex.split(line, comments=True)
    if words[0] == "make":
        targets = set(re.findall(r"^([a-z][\w-]*):", (REPO / "Makefile").read_text(), re.MULTILINE))
        assert {word for word in words[1:] if "=" not in word} <= targets, f"{where}: {line}"
        return
    from chartrl.cli import build_parser

    args = build_parser().parse_args(words[1:])
    for name in getattr(args, "configfile", None) or []:
        assert name in USER_FILES or (REPO / name).exists(), f"{where}: {line} names {name}"


def test_a_program_of_the_environment_is_told_from_a_snippet_or_another_tool():
    """What makes an unmarked test fail (tests/conftest.py): a Python program of this environment, not a snippet."""
    python = str(BIN / "python")
    assert runs_a_program([BIN / "snakemake", "-n"]) and runs_a_program(f"{BIN}/chartrl plan --configfile x.yaml")
    assert runs_a_program([python, "-m", "chartrl", "config", "check"])
    assert runs_a_program([python, str(REPO / "tests/verl_backend/verl_standin.py")])
    assert not runs_a_program([python, "-c", "import sys"]) and not runs_a_program(["git", "rev-parse", "HEAD"])
    assert not runs_a_program("bash envs/cpu.post-deploy.sh") and not runs_a_program(["/usr/bin/python3", "-m", "x"])


@pytest.mark.slow  # it starts an interpreter: that is what it checks
def test_a_spawned_multiprocessing_worker_counts_as_a_program():
    """multiprocessing's spawn start method execs a fresh interpreter without subprocess.Popen: recorded too."""
    import multiprocessing
    import types

    item = types.SimpleNamespace(stash=pytest.Stash())
    with recording_programs(item):
        worker = multiprocessing.get_context("spawn").Process(target=os.getpid)
        worker.start()
        worker.join()
    assert worker.exitcode == 0
    started = item.stash[PROGRAMS]  # the worker, and the resource tracker if none was running yet
    assert started and all(p.startswith("multiprocessing: ") for p in started)
    assert any("spawn_main" in p for p in started)


def test_the_quick_loop_draws_a_share_of_each_fuzzers_examples_and_refuses_a_nonsense_share(monkeypatch):
    assert examples(10_000, 1.0) == 10_000 and examples(10_000, 0.1) == 1_000 and examples(300, 0.1) == 100
    monkeypatch.setenv("CHARTRL_FUZZ_SHARE", "0.1")
    assert _fuzz_share() == 0.1
    for bad in ("0", "1.5", "a tenth"):
        monkeypatch.setenv("CHARTRL_FUZZ_SHARE", bad)
        with pytest.raises(pytest.UsageError, match=f"CHARTRL_FUZZ_SHARE='{bad}'"):
            _fuzz_share()
