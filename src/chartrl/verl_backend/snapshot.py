"""The starting model pinned to a hub commit (``model.revision``): the commit's snapshot folder in the Hugging Face
cache, which every verl worker then loads.

verl 0.9.1 has no revision setting: ``HFModelConfig`` hands ``model.path`` as it is to the FSDP actor and reference,
to vLLM and (through ``reward_kwargs.tokenizer``) to the reward's tokenizer, each of which would load a hub id's
newest commit on its own. A snapshot folder is a plain local path, the same for all of them. ``hf download <id>
--revision <commit>`` writes it at ``<cache>/models--<org>--<name>/snapshots/<commit>/`` (huggingface_hub's cache
layout), where the cache is ``HF_HUB_CACHE`` or ``HF_HOME/hub`` of the machine the workflow runs on; the workers
must see the same path, as they see ``results/``.
"""

from __future__ import annotations

from pathlib import Path

from chartrl.config import ModelConfig


def hub_cache() -> Path:
    """The Hugging Face hub cache of this process (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else the default)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def snapshot_folder(repo_id: str, revision: str, cache: Path | None = None) -> Path:
    """Where huggingface_hub keeps ``repo_id`` at commit ``revision``."""
    return (cache or hub_cache()) / f"models--{repo_id.replace('/', '--')}" / "snapshots" / revision


def missing_snapshot_problem(model: ModelConfig, workdir: str | Path = ".") -> str | None:
    """Why a job pinned to ``model.revision`` cannot start (the snapshot is not downloaded), naming the command
    that downloads it; None when there is nothing to pin (no revision, or model.path a local folder) or it is
    there."""
    if model.revision is None or model.path is None or (Path(workdir) / model.path).exists():
        return None
    folder = snapshot_folder(model.path, model.revision)
    if (folder / "config.json").is_file():
        return None
    return (
        f"model.revision {model.revision}: {model.path} at that commit is not in the Hugging Face cache ({folder}); "
        f"download it where the workflow runs with `hf download {model.path} --revision {model.revision}` "
        "(HF_HUB_CACHE or HF_HOME name the cache; verl's workers must see the same path), then rerun"
    )
