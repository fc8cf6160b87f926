"""Hugging Face datasets laid out as hub repositories (a hub id, or a local folder laid out like one), read with
``datasets``: the loader the hub readers (``chartqa_hf``, ``geoqa_r1v``, ``geoqa_mc``) share.

It imports no reader and not the source registry (``chartrl.data.sources``), so a reader can be imported on its
own, in any order."""

from __future__ import annotations

from pathlib import Path

from chartrl.data.errors import DataSourceError


def load_hub_split(path: str, split: str, revision: str | None, root: Path):
    """A ``datasets.Dataset`` for ``split`` of a hub dataset id or of a local folder laid out like a hub repo,
    with images left undecoded (raw bytes)."""
    import datasets

    local = Path(root) / path
    source = str(local) if local.exists() else path
    try:
        ds = datasets.load_dataset(source, split=split, revision=None if local.exists() else revision)
    except (FileNotFoundError, ValueError, ConnectionError, OSError) as err:
        where = f"local folder {local}" if local.exists() else f"hub dataset {path!r} (revision {revision})"
        raise DataSourceError(
            f"cannot load split {split!r} of {where}: {type(err).__name__}: {err}. Without network access, "
            "download the dataset to a folder and point datasets.<name>.path at it"
        ) from err
    if "image" in ds.column_names:
        ds = ds.cast_column("image", datasets.Image(decode=False))
    return ds
