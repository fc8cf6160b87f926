"""verl's generation dumps -> our generations contract (``chartrl.rollout.generations``), so the scorers, the
diagonal check and the report read a verl evaluation exactly as they read a local one.

A generation job (``chartrl.verl_backend.overrides.generation_overrides``) runs verl with ``trainer.val_only`` and
``trainer.validation_data_dir``; verl 0.9.1 writes ``{dir}/{global_step}.jsonl`` (``_write_generations`` in
``verl/trainer/ppo/v1/trainer_base.py``), one JSON object per generation::

    {"input": decoded prompt, "output": decoded response (every turn), "gts": ground truth, "score": ...,
     "step": ..., "uid": ..., <every key our reward function returned>}

Our generation reward (``generation_record``) returns the row id, so each line finds its question in the test
split; the response is read with ``chartrl.verl_backend.trajectory`` and each tool call run again on the chart
(our tools are deterministic), which gives the exact tool outcome and the edited images verl does not dump.

A dump can lack questions: verl drops a prompt longer than ``data.max_prompt_length`` when
``data.filter_overlong_prompts`` is on, and an agent loop that failed, without a word. So the conversion checks
coverage (:func:`dump_coverage`): a generation job (``chartrl.verl_backend.evaluation``) names how many samples each
question of the split must have and fails when one has fewer, rather than score the test split on what came back;
otherwise a shortfall is logged.

What a dump cannot tell is filled as honestly as it can be: token counts are counted again from the text with the
policy's tokenizer (image tokens are not in the decoded text: ``prompt_tokens`` and ``tool_turn_tokens`` count
text only); ``vision_tokens_sampled`` is 0 (verl's vLLM rollout masks them out); ``truncated`` marks a final turn
without a closing answer tag whose episode used up ``response_length``.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chartrl.answers import extract_answer
from chartrl.data.contract import Row
from chartrl.errors import ChartrlError
from chartrl.files import write_atomically
from chartrl.rollout.conversation import chart_image, question_of
from chartrl.rollout.generations import SCHEMA
from chartrl.verl_backend.trajectory import Trajectory, read_trajectory

log = logging.getLogger(__name__)
DUMP_FILE = re.compile(r"^(\d+)\.jsonl$")


class DumpError(ChartrlError):
    """A generation dump is missing or does not match the data it was generated from."""


def dump_file(dump_dir: str | Path) -> Path:
    """The dump verl wrote into ``dump_dir`` (the highest step's, when there are several)."""
    folder = Path(dump_dir)
    found = sorted(
        ((int(m.group(1)), p) for p in folder.glob("*.jsonl") if (m := DUMP_FILE.match(p.name))),
        key=lambda item: item[0],
    )
    if not found:
        raise DumpError(f"no generation dump ({{step}}.jsonl) in {folder}; did verl run with trainer.val_only?")
    return found[-1][1]


def read_dump(path: str | Path) -> list[dict[str, Any]]:
    lines = Path(path).read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    missing = [i for i, r in enumerate(records) if "row_id" not in r or "output" not in r]
    if missing:
        raise DumpError(
            f"{path}: lines {missing[:5]} lack 'row_id' or 'output'; generate with "
            "reward.custom_reward_function.name=generation_record (chartrl.verl_backend.overrides)"
        )
    return records


def dump_coverage(dump: Sequence[dict[str, Any]], rows: Sequence[Row]) -> Counter[str]:
    """Samples the dump holds for each question of ``rows`` (0 for a question it lacks)."""
    counts = Counter(str(line["row_id"]) for line in dump)
    return Counter({row.id: counts[row.id] for row in rows})


def coverage_problem(coverage: Counter[str], samples_per_question: int) -> str | None:
    """What is wrong when a question has other than ``samples_per_question`` samples, naming the questions; None
    when every question has exactly that many."""
    short = [row_id for row_id, count in coverage.items() if count < samples_per_question]
    extra = [row_id for row_id, count in coverage.items() if count > samples_per_question]
    if not short and not extra:
        return None
    covered = sum(1 for count in coverage.values() if count >= samples_per_question)
    each = f"{samples_per_question} sample{'s' if samples_per_question > 1 else ''} each"
    found = [f"the dump covers {covered} of the {len(coverage)} questions generated on ({each})"]
    for name, ids in (("fewer", short), ("more", extra)):
        if ids:
            found.append(f"{len(ids)} have {name}: {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}")
    return "; ".join(found)


def generation_records(
    dump: Sequence[dict[str, Any]],
    rows: Sequence[Row],
    *,
    tools: Sequence[str],
    max_calls: int,
    tokenizer,
    image_dir: str | Path,
    model: str,
    response_length: int | None = None,
    samples_per_question: int | None = None,
) -> list[dict[str, Any]]:
    """One generations-contract record per dump line (samples numbered per question in dump order), once the dump
    is known to hold only questions of ``rows`` and to cover them (:func:`check_coverage`)."""
    by_id = {row.id: row for row in rows}
    unknown = sorted({str(r["row_id"]) for r in dump} - set(by_id))
    if unknown:
        raise DumpError(f"the dump names rows the data does not have: {', '.join(unknown[:5])}")
    check_coverage(dump, rows, samples_per_question)
    samples: Counter[str] = Counter()
    records = []
    for line in dump:
        row = by_id[str(line["row_id"])]
        sample = samples[row.id]
        samples[row.id] += 1
        trajectory = read_trajectory(
            str(line["output"]), tools=tools, bboxes=row.bboxes, max_calls=max_calls, chart=chart_image(row)
        )
        turns = _turns(trajectory, tokenizer)
        images = _save_images(trajectory, Path(image_dir), row.id, sample)
        sampled = sum(t["tokens"] for t in turns if t["role"] == "assistant")
        tool_tokens = sum(t["tokens"] for t in turns if t["role"] == "tool")
        prompt_tokens = len(tokenizer.encode(str(line.get("input", "")), add_special_tokens=False))
        final = trajectory.final_response
        answer = extract_answer(final)
        truncated = bool(
            response_length is not None and "</answer>" not in final and sampled + tool_tokens >= response_length
        )
        records.append(
            {
                "id": row.id,
                "sample": sample,
                "split": row.split,
                "question": question_of(row),
                "ground_truth": row.answer,
                "data_source": row.data_source,
                "subset": str(row.extra.get("subset", "")),
                "chart_type": row.chart_type,
                "turns": json.dumps(turns),
                "tool_calls": json.dumps([t.text for t in trajectory.calling_turns]),
                "tool_called": bool(trajectory.calling_turns),
                "tool_outcome": trajectory.tool_outcome,
                "tool_error_kinds": json.dumps([t.error_kind for t in trajectory.calling_turns]),
                "final_response": final,
                "answer": answer,
                "prompt_tokens": prompt_tokens,
                "response_tokens": sampled,
                "total_tokens": prompt_tokens + sampled + tool_tokens,
                "tool_turn_tokens": tool_tokens,
                "vision_tokens_sampled": 0,
                "truncated": truncated,
                "edited_images": json.dumps(images),
                "model": model,
            }
        )
    return records


def _turns(trajectory: Trajectory, tokenizer) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for turn in trajectory.turns:
        tokens = len(tokenizer.encode(turn.text, add_special_tokens=False)) + 1  # + the end-of-turn token
        stop = "tool_call" if turn.called and turn.observation is not None else "eos"
        turns.append({"role": "assistant", "text": turn.text, "tokens": tokens, "stop": stop})
        if turn.observation is not None:
            tool = {"role": "tool", "text": turn.observation}
            tool["tokens"] = len(tokenizer.encode(turn.observation, add_special_tokens=False))
            tool["image"] = turn.image is not None
            turns.append(tool)
    return turns


def _save_images(trajectory: Trajectory, folder: Path, row_id: str, sample: int) -> list[str]:
    paths = []
    for k, turn in enumerate(t for t in trajectory.turns if t.image is not None):
        path = folder / f"{row_id}-s{sample}-{k}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, lambda tmp, image=turn.image: image.save(tmp, format="PNG"))
        paths.append(str(path))
    return paths


def check_coverage(dump: Sequence[dict[str, Any]], rows: Sequence[Row], samples_per_question: int | None) -> None:
    """Fail when a question of ``rows`` lacks samples (``samples_per_question`` given), else log the shortfall."""
    coverage = dump_coverage(dump, rows)
    if samples_per_question is not None:
        problem = coverage_problem(coverage, samples_per_question)
        if problem:
            raise DumpError(
                f"{problem}. verl drops a prompt longer than data.max_prompt_length (data.filter_overlong_prompts) "
                "and an agent loop that failed, and scores over what came back would not be the split's: find the "
                "failure in the job's log (or raise verl.max_prompt_length) and generate again"
            )
    elif missing := [row_id for row_id, count in coverage.items() if count == 0]:
        log.warning("the dump lacks %d of the %d questions: %s", len(missing), len(coverage), ", ".join(missing[:5]))


def convert_dump(
    dump_dir: str | Path,
    rows: Sequence[Row],
    out: str | Path,
    *,
    tools: Sequence[str],
    max_calls: int,
    tokenizer_path: str | Path,
    image_dir: str | Path,
    model: str,
    response_length: int | None = None,
    samples_per_question: int | None = None,
) -> list[dict[str, Any]]:
    """Read verl's dump in ``dump_dir`` and write ``out`` in the generations contract (atomically); returns the
    records. ``rows``: the split the job generated on (our contract); ``tools``: the tools offered (empty for a
    no-tool series); ``tokenizer_path``: the policy's tokenizer (the merged checkpoint folder);
    ``samples_per_question``: the samples each question of ``rows`` must have (verl's ``val_kwargs.n``), or the
    conversion fails naming the questions without them; None only logs a shortfall."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_path))
    records = generation_records(
        read_dump(dump_file(dump_dir)),
        rows,
        tools=tools,
        max_calls=max_calls,
        tokenizer=tokenizer,
        image_dir=image_dir,
        model=model,
        response_length=response_length,
        samples_per_question=samples_per_question,
    )
    table = pa.Table.from_pylist(records, schema=SCHEMA)
    write_atomically(out, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    return records
