"""DeepEyes reader: the parquet files verl's DeepEyes recipe writes (``recipe/deepeyes/deepeyes47k_preprocess.py``
on ``data_0.1.2_visual_toolbox_v2.parquet`` of DeepEyes-Datasets-47k, split 1,000 val questions off with seed 42),
into the contract. One row per question::

    data_source   "hiyouga/DeepEyes-Datasets-47k"
    prompt        [{role: system, content}, {role: user, content: "<image>\\n<question ...>"}]
    images        [{bytes, path}]                   (one image)
    ability       str
    reward_model  {ground_truth, style}
    extra_info    {split, index, answer, question, need_tools_kwargs: true,
                   tools_kwargs: {image_zoom_in_tool: {create_kwargs: {image: "data:image/jpeg;base64,..."}}}}

The problem is the user message (``<image>`` placeholder kept, or added in front), the answer
``reward_model.ground_truth`` (else ``extra_info.answer``), the image ``images[0]`` (else the data URI the zoom
tool's ``create_kwargs`` carry). The ``extra_info`` tool fields are checked, not trusted: a row that says it
needs tool kwargs (``need_tools_kwargs``) without the zoom tool's image in them is rejected, naming the field;
what they hold is recorded in the row's ``extra`` (``tools``: the tool names, ``zoom_image``: whether the zoom
tool was given the image, ``index``, ``ability``, ``question``). Every image is a region-free photo or chart for
the zoom tool: no label boxes (``zoom_in`` needs none).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from chartrl.config import DatasetConfig
from chartrl.data.contract import IMAGE_PLACEHOLDER, Rejected, Row, RowRejected, empty_bboxes, with_one_placeholder
from chartrl.data.geoqa import read_records
from chartrl.data.images import image_source_bytes, intake
from chartrl.data.sources import dataset_source, only_split

RECIPE_TOOL = "image_zoom_in_tool"
"""The recipe's name for its zoom tool (``verl.tools.image_zoom_in_tool.ImageZoomInTool``); chartrl's is ``zoom_in``."""


def _user_content(prompt: Any) -> str:
    """The text of the last user message of the recipe's ``prompt`` (a list of chat messages)."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, list | tuple):
        raise RowRejected(f"prompt is a {type(prompt).__name__}, not a list of chat messages")
    users = [m for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
    if not users:
        raise RowRejected("prompt has no user message")
    content = users[-1].get("content")
    if isinstance(content, list):  # content parts: keep the text ones, an image part becomes the placeholder
        content = "".join(
            IMAGE_PLACEHOLDER if p.get("type") == "image" else str(p.get("text") or "")
            for p in content
            if isinstance(p, Mapping)
        )
    if not isinstance(content, str) or not content.strip():
        raise RowRejected("prompt's user message has no text")
    return content


def data_uri_bytes(uri: str) -> bytes:
    """The bytes of a ``data:image/...;base64,...`` URI (what the recipe puts in the zoom tool's create_kwargs)."""
    head, sep, payload = uri.partition(",")
    if not (sep and head.startswith("data:") and head.endswith(";base64")):
        raise RowRejected("extra_info.tools_kwargs.image_zoom_in_tool.create_kwargs.image is not a base64 data URI")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as err:
        raise RowRejected(
            f"extra_info.tools_kwargs.image_zoom_in_tool.create_kwargs.image: bad base64 ({err})"
        ) from err


def tool_fields(extra_info: Mapping[str, Any]) -> dict[str, Any]:
    """The recipe's tool fields of one row, checked: ``tools`` (names in ``tools_kwargs``, with a value) and
    ``zoom_image`` (the zoom tool's ``create_kwargs.image``, a data URI, or None)."""
    kwargs = extra_info.get("tools_kwargs") or {}
    if not isinstance(kwargs, Mapping):
        raise RowRejected(f"extra_info.tools_kwargs is a {type(kwargs).__name__}, not a mapping of tool -> kwargs")
    tools = sorted(name for name, value in kwargs.items() if value)
    create = ((kwargs.get(RECIPE_TOOL) or {}).get("create_kwargs") or {}) if RECIPE_TOOL in tools else {}
    image = create.get("image") if isinstance(create, Mapping) else None
    if extra_info.get("need_tools_kwargs") and not image:
        raise RowRejected(
            "extra_info.need_tools_kwargs is true but extra_info.tools_kwargs has no "
            f"{RECIPE_TOOL}.create_kwargs.image; rerun the recipe's preprocessing (deepeyes47k_preprocess.py)"
        )
    return {"tools": tools, "zoom_image": image or None}


def deepeyes_row(dataset: DatasetConfig, split: str, row_id: str, record: Mapping[str, Any], base: Path) -> Row:
    """One recipe row -> a contract row (RowRejected, naming the field, for a row that cannot be used)."""
    extra_info = record.get("extra_info") or {}
    if not isinstance(extra_info, Mapping):
        raise RowRejected(f"extra_info is a {type(extra_info).__name__}, not a mapping")
    tools = tool_fields(extra_info)
    truth = (record.get("reward_model") or {}).get("ground_truth") or extra_info.get("answer")
    answer = str(truth).strip() if truth is not None else ""
    if not answer:
        raise RowRejected("no answer: reward_model.ground_truth and extra_info.answer are empty")
    images = record.get("images")
    if images:
        if not isinstance(images, list | tuple):
            images = [images]
        if len(images) != 1:
            raise RowRejected(f"{len(images)} images; the contract holds one image per row")
        raw = image_source_bytes(images[0], base)
    elif tools["zoom_image"]:
        raw = data_uri_bytes(tools["zoom_image"])
    else:
        raise RowRejected("no image: images is empty and the zoom tool's create_kwargs carry none")
    png, width, height = intake(raw, dataset.max_image_pixels)
    problem = with_one_placeholder(_user_content(record.get("prompt")), "prompt")
    question = str(extra_info.get("question") or problem).replace(IMAGE_PLACEHOLDER, "").strip()
    return Row(
        id=row_id,
        images=[png],
        problem=problem,
        answer=answer,
        data_source="deepeyes",
        chart_type="unknown",
        bboxes=empty_bboxes(),
        split=split,
        extra={
            "question": question,
            "subset": "human",
            "image_size": [width, height],
            "ability": str(record.get("ability") or ""),
            "source_data": str(record.get("data_source") or ""),
            "index": extra_info.get("index"),
            "tools": tools["tools"],
            "zoom_image": tools["zoom_image"] is not None,
        },
    )


def _split_file(dataset: DatasetConfig, split: str, root: Path) -> list[Path]:
    return [root / dataset.options["files"][split]]


@dataset_source("deepeyes", only_split("files"), input_files=_split_file)
def read_deepeyes(dataset: DatasetConfig, split: str, *, root: Path, **_: Any) -> Iterator[Row | Rejected]:
    path = Path(root) / dataset.options["files"][split]
    records = read_records(path)
    limit = dataset.options.get("limit")
    for k, record in enumerate(records[:limit] if limit else records):
        row_id = f"{split}-{k:06d}"  # the row's place in the file (the recipe's extra_info.index is kept in extra)
        try:
            yield deepeyes_row(dataset, split, row_id, record, path.parent)
        except RowRejected as err:
            yield Rejected(row_id, str(err), source=f"{path.name}[{k}]")
