"""Whether the chartrl a job imports is the code of the checkout it runs from.

The environments Snakemake makes (``--sdm conda``: envs/gpu.yaml, envs/cpu.yaml) install chartrl once, when they
are created, by their post-deploy script, and Snakemake creates an environment again only when its file changes.
Installed as a copy, the package would stay the code of that day: a later fix of a reward or a scorer would never
reach the jobs, which would train and score with the old code while the rules' code inputs say the new one ran. So
the post-deploy scripts install chartrl editable (the environment imports the checkout's ``src/``), and a job
checks, before it starts, that what it imports is the checkout's code: a copy whose files differ is refused,
naming the files and the fix.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from chartrl.errors import ChartrlError

SOURCE_ENV = "CHARTRL_SOURCE"
"""The checkout's root when jobs run elsewhere (as the post-deploy scripts read it); default: the working folder."""
SHOWN_FILES = 5


def _digests(package: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file of a chartrl package folder (compiled bytecode left out)."""
    return {
        path.relative_to(package).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(package.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def differing_files(installed: Path, source: Path) -> list[str]:
    """The files in which the installed package ``installed`` is not the source package ``source``: the files of
    the installed copy whose content differs or that the source no longer has, and the source's modules the copy
    lacks (files other than modules that the copy lacks are files the package does not ship)."""
    copy, current = _digests(installed), _digests(source)
    changed = [name for name, digest in copy.items() if current.get(name) != digest]
    added = [name for name in current if name not in copy and name.endswith(".py")]
    return sorted(changed + added)


def stale_install_problem(source_root: str | Path | None = None) -> str | None:
    """Why the chartrl this Python imports is not the code of the checkout at ``source_root`` (default:
    ``CHARTRL_SOURCE``, else the working folder), or None: it is that checkout's ``src/chartrl`` itself (editable,
    or PYTHONPATH), a copy with the same files, or there is no checkout there to compare with."""
    root = Path(source_root or os.environ.get(SOURCE_ENV) or Path.cwd())
    source = (root / "src" / "chartrl").resolve()
    installed = Path(__file__).resolve().parent  # the package this very module was imported from
    if installed == source or not (source / "__init__.py").is_file():
        return None
    differing = differing_files(installed, source)
    if not differing:
        return None
    shown = ", ".join(differing[:SHOWN_FILES]) + (
        f" and {len(differing) - SHOWN_FILES} more" if len(differing) > SHOWN_FILES else ""
    )
    return (
        f"the chartrl that {sys.executable} imports ({installed}) is a copy older than the checkout {root} "
        f"({shown} differ), so this job would run the old code. Install the checkout editable in that environment: "
        f"{sys.executable} -m pip install --no-deps -e {root} (the post-deploy scripts of envs/ do, for an "
        "environment Snakemake creates)"
    )


class StaleInstall(ChartrlError):
    """The chartrl this Python imports is an older copy of the checkout's code."""


def refuse_a_stale_install(source_root: str | Path | None = None) -> None:
    """Raise :class:`StaleInstall` when :func:`stale_install_problem` finds one."""
    problem = stale_install_problem(source_root)
    if problem:
        raise StaleInstall(problem)
