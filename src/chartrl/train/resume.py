"""What a train job may resume from: the checkpoints of this very job, and nothing else (both backends).

A job's key hashes everything its checkpoints were computed from: the resolved spec it runs, the content of each
input (the starting model's files, the train and val splits; a model named by a hub id counts as its name, the
spec holding its revision) and the source of the code its reward computes with (:data:`REWARD_CODE`). A rerun
whose key matches its checkpoints' continues from them. Checkpoints of any other key were trained from something
else (a changed warm start, a fixed reward, other data): they are moved aside into ``superseded/<their key>/`` in
the run folder, never continued and never deleted (remove that folder once it is not wanted), and the job starts
from step 0 with a new MLflow run.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from chartrl.files import content_digest
from chartrl.warmstart import RUN_RECORDS

PACKAGE = Path(__file__).resolve().parents[1]
REWARD_CODE = ("rewards", "judge", "answers.py", "prompts")
"""The parts of the chartrl package a reward computes with: the reward functions, the judge and its prompts, answer
extraction and relaxed accuracy, and the prompt templates the policy is asked with. A change to any of them changes
what a training step rewards, so checkpoints trained before it are not continued after it."""
SUPERSEDED = "superseded"
"""Inside a run folder: the checkpoints of other keys, one folder per key."""


def code_digest(parts: Iterable[str] = REWARD_CODE, package: Path = PACKAGE) -> str:
    """sha256 of the source files (``.py``, ``.jinja``) under ``parts`` of the chartrl package, by relative name."""
    digest = hashlib.sha256()
    for part in parts:
        path = package / part
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in (".py", ".jinja"))
        for file in files:
            digest.update(f"\0{file.relative_to(package).as_posix()}\0".encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def input_digest(value: str | Path) -> str:
    """A job input's content digest: a local file's or folder's bytes (a model folder's without the warm start's
    metrics and run record, which differ between two warm starts of the same weights); anything else (a hub model
    id) by name."""
    path = Path(value)
    if path.exists():
        return content_digest(path, leave_out=RUN_RECORDS)
    return f"name:{value}"


def job_key(spec: Mapping[str, Any], inputs: Mapping[str, str | Path], code: Iterable[str] = REWARD_CODE) -> str:
    """The key of a train job: its spec, its inputs' content (``name -> path or id``) and its reward's code."""
    text = json.dumps(
        {
            "spec": spec,
            "inputs": {name: input_digest(value) for name, value in sorted(inputs.items())},
            "code": code_digest(code),
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def set_aside(run_dir: Path, names: Iterable[str], key: str | None) -> Path | None:
    """Move the entries ``names`` of ``run_dir`` (what a job of another key wrote there) into
    ``superseded/<key>/``; returns that folder, or None when there was nothing to move. Renames only: nothing is
    copied or deleted."""
    run_dir = Path(run_dir)
    present = [run_dir / name for name in names if (run_dir / name).exists()]
    if not present:
        return None
    base = run_dir / SUPERSEDED / (key or "unknown-key")
    target, n = base, 1
    while target.exists():
        n += 1
        target = base.with_name(f"{base.name}-{n}")
    target.mkdir(parents=True)
    for path in present:
        os.replace(path, target / path.name)
    return target
