"""Print this machine's pip package sources as ``uv pip install`` options (used by ``make setup``).

``make setup`` installs the lock file with uv, which unpacks and compiles the wheels in parallel (with
``--compile-bytecode``, as pip compiles them). uv does not read pip's configuration, so the sources
pip is set up with (``pip config list``: files and PIP_* variables) are passed on: each find-links folder, the index
and extra indexes, and a global constraint file. pip picks the best match over all its indexes, and so does uv with
``--index-strategy unsafe-best-match``. With no pip configuration the output is only that strategy and uv reads
PyPI, as pip would.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

KEYS = {"find-links": "--find-links", "index-url": "--index-url", "extra-index-url": "--extra-index-url"}


def pip_config() -> dict[str, str]:
    """pip's effective settings: a PIP_* variable (``:env:`` in ``pip config list``) overrides the same setting
    from a file, as in pip."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    settings: dict[str, str] = {}
    for line in sorted(out.splitlines(), key=lambda line: line.startswith(":env:")):
        name, _, value = line.partition("=")
        key = name.rsplit(".", 1)[-1]
        settings[key] = value.strip().strip("'\"")
    return settings


def uv_options(settings: dict[str, str]) -> list[str]:
    options = []
    for key, flag in KEYS.items():
        for value in settings.get(key, "").split():
            options += [flag, value]
    if "index-url" not in settings and "extra-index-url" in settings:
        options += ["--index-url", "https://pypi.org/simple"]  # pip's default index stays in the search
    if settings.get("constraint"):
        options += ["--constraint", settings["constraint"]]
    return [*options, "--index-strategy", "unsafe-best-match"]


if __name__ == "__main__":
    print(shlex.join(uv_options(pip_config())))
