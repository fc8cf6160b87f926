"""The memory estimate of a verl job, piece by piece against hand-computed figures: the model sizes it reads (the
parameter formula against the counts on the model pages), the per-GPU states FSDP shards, the logits of the padded
path, the activations, each phase's total, and the largest micro-batch a refusal suggests."""

from __future__ import annotations

import dataclasses
import json
import struct

import pytest

from chartrl.config import model_config
from chartrl.verl_backend.architectures import (
    KNOWN_ARCHITECTURES,
    folder_architecture,
    model_architecture,
    qwen2_5_vl_parameters,
)
from chartrl.verl_backend.memory import (
    GIB,
    LOGITS_BYTES_PER_ELEMENT,
    JobShape,
    actor_parameter_bytes,
    adam_bytes,
    checkpointed_activation_bytes,
    gathered_unit_bytes,
    job_phases,
    largest_fitting_micro_batch,
    logits_bytes,
    memory_problems,
    reference_bytes,
)

QWEN_3B = KNOWN_ARCHITECTURES["Qwen/Qwen2.5-VL-3B-Instruct"]
QWEN_7B = KNOWN_ARCHITECTURES["Qwen/Qwen2.5-VL-7B-Instruct"]


@pytest.mark.parametrize(
    "sizes, published",
    [
        # the 3B: 36 layers of 2048, 2 KV heads of 128, tied embeddings (the model page: 3.75B params)
        (dict(vocab=151_936, hidden=2048, layers=36, intermediate=11_008, key_value=256, tied=True), 3_754_622_976),
        # the 7B: 28 layers of 3584, 4 KV heads of 128, untied (the model page: 8.29B params)
        (dict(vocab=152_064, hidden=3584, layers=28, intermediate=18_944, key_value=512, tied=False), 8_292_166_656),
    ],
)
def test_the_parameter_formula_gives_the_model_pages_counts(sizes, published):
    vision = dict(vision_hidden=1280, vision_depth=32, vision_intermediate=3420)
    assert qwen2_5_vl_parameters(**sizes, **vision) == published


def test_the_known_qwen2_5_vl_sizes_agree_with_the_formula():
    for arch in (QWEN_3B, QWEN_7B):
        assert arch.parameters in (3_754_622_976, 8_292_166_656)
        assert arch.embedding_parameters == arch.vocab_size * arch.hidden_size * (1 if arch.tie_word_embeddings else 2)


def _safetensors(path, tensors):
    """A safetensors file of zero-filled bf16 tensors: 8 bytes of header length, the JSON header, the data."""
    header, offset = {}, 0
    for name, shape in tensors.items():
        size = 2
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + bytes(offset))


def test_a_local_folder_is_read_from_its_config_and_safetensors(tmp_path):
    text = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 100, "intermediate_size": 128,
            "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip
    config = {"model_type": "qwen2_5_vl", "text_config": text, "vision_config": {"depth": 2, "hidden_size": 32}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    _safetensors(tmp_path / "model.safetensors", {"a": [10, 20], "b": [7]})
    arch = folder_architecture(tmp_path)
    assert arch.parameters == 207  # 10 x 20 + 7, from the header
    assert (arch.hidden_size, arch.num_hidden_layers, arch.vocab_size, arch.key_value_size) == (64, 2, 100, 32)
    assert (arch.vision_depth, arch.vision_hidden_size, arch.image_token_pixels) == (2, 32, 28 * 28)
    # a sharded checkpoint: the index's total bytes over the dtype's
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 2000}}))
    assert folder_architecture(tmp_path).parameters == 1000
    assert folder_architecture(tmp_path / "missing") is None


def test_which_sizes_a_model_path_gets(tmp_path):
    base = {"path": None, "min_pixels": 3136, "max_pixels": 100352}
    tiny = {"seed": 0, "vocab_size": 2000, "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vision_depth": 4, "vision_hidden_size": 128,
            "vision_intermediate_size": 256, "vision_num_heads": 4}  # fmt: skip
    assert model_architecture(model_config({**base, "tiny": tiny})).parameters < 5_000_000  # the embedded default's
    known = model_config({**base, "tiny": tiny, "path": "Qwen/Qwen2.5-VL-3B-Instruct"})
    assert model_architecture(known) is QWEN_3B
    assert model_architecture(model_config({**base, "tiny": tiny, "path": "someone/unknown-vlm"})) is None


# The study's train job on 8 GPUs (config/gpu.yaml, a tool series): 5,184 tokens = 2,048 prompt + 3,136 response.
STUDY = JobShape(
    architecture=QWEN_3B,
    gpus=8,
    device_gib=80,
    trains=True,
    lora_parameters=0,
    reference=True,
    param_offload=False,
    optimizer_offload=False,
    vllm_share=0.6,
    longest=5184,
    image_tokens=2 * 2048,
    log_prob_micro=4,
    update_micro=4,
    update_sequences_per_gpu=80,
    logits_path="padded",
    temperature_copy=False,
    checkpointing=True,
)
P = 3_754_622_976


@pytest.mark.parametrize(
    "size, expected_bytes",
    [
        (actor_parameter_bytes(P, 8), 4 * P / 8),  # fp32 parameters, sharded over 8 GPUs: 1.75 GiB
        (adam_bytes(P, 8), 8 * P / 8),  # AdamW's two fp32 moments: 3.50 GiB
        (reference_bytes(P, 8), 2 * P / 8),  # the bf16 reference: 0.87 GiB
        (gathered_unit_bytes(QWEN_3B), 2 * 151_936 * 2048),  # the tied embedding, all-gathered in bf16
        # the figure: [16, 5184, 151936] logits are 12.6 G elements, 25 GB in bf16; verl's entropy holds
        # 10 bytes an element on the padded path (bf16 logits + fp32 softmax + fp32 product)
        (logits_bytes(16, 5184, 151_936, 2), 25_204_359_168),
        (logits_bytes(16, 5184, 151_936, LOGITS_BYTES_PER_ELEMENT["padded", "log-prob"]), 126_021_795_840),
        # gradient checkpointing: 36 layer inputs in bf16 plus one layer recomputed (34 bytes a token and unit)
        (checkpointed_activation_bytes(4, 5184, 2048, 36, True), (36 * 2 + 34) * 4 * 5184 * 2048),
        (checkpointed_activation_bytes(4, 5184, 2048, 36, False), 36 * 34 * 4 * 5184 * 2048),
    ],
)
def test_each_piece_against_its_formula(size, expected_bytes):
    assert size == expected_bytes


def test_the_studys_phases_by_hand():
    rollout, log_prob, update = job_phases(STUDY)
    states = (4 + 8 + 2) * P / 8  # fp32 parameters, AdamW states, bf16 reference
    assert rollout.total == pytest.approx(states + 0.6 * 80 * GIB + 4 * GIB)  # 58.1 GiB
    assert rollout.total / GIB == pytest.approx(58.1, abs=0.05)
    assert log_prob.part("logits") == 4 * 5184 * 151_936 * 10  # 29.3 GiB
    assert update.part("logits") == 4 * 5184 * 151_936 * 8  # logits, their unpadded copy, fp32 log-softmax rows
    assert update.part("gradients") == 4 * P / 8
    assert max(p.total for p in (rollout, log_prob, update)) <= 80 * GIB
    assert memory_problems(STUDY) == []


def test_a_generation_job_only_rolls_out_and_holds_no_optimizer():
    [rollout] = job_phases(dataclasses.replace(STUDY, trains=False))
    assert rollout.part("AdamW states") == 0 and rollout.part("vLLM") == 0.6 * 80 * GIB


def test_offload_lowers_the_rollout_but_not_the_update():
    offloaded = dataclasses.replace(STUDY, param_offload=True, optimizer_offload=True)
    assert job_phases(offloaded)[0].total == pytest.approx((2 * P / 8) + 52 * GIB)  # the reference, vLLM, reserve
    assert job_phases(offloaded)[2].total == job_phases(STUDY)[2].total  # verl loads everything to update


def test_lora_trains_the_adapters_beside_the_frozen_fp32_base():
    lora = dataclasses.replace(STUDY, lora_parameters=QWEN_3B.lora_parameters(16), reference=False)
    update = job_phases(lora)[2]
    adapters = QWEN_3B.lora_parameters(16)
    assert adapters == 16 * (9 * 2048 + 2 * 256 + 3 * 11_008) * 36  # q, k, v, o, gate, up, down of 36 layers
    assert update.part("actor parameters") == 4 * (P + adapters) / 8
    assert update.part("AdamW states") == 8 * adapters / 8 and update.part("reference") == 0


@pytest.mark.parametrize(
    "micro, fits",
    [
        (16, 8),  # EasyR1's 16: the entropy of [16, 5184, 151936] logits alone is 117 GiB; at most 8 fit
        (4, 8),  # the study's 4 fits, and so would up to 8
    ],
)
def test_the_largest_micro_batch_that_fits(micro, fits):
    shape = dataclasses.replace(STUDY, log_prob_micro=micro)
    assert largest_fitting_micro_batch(job_phases(shape)[1], micro, 80) == fits


def test_a_log_prob_micro_batch_of_16_on_the_padded_path_is_refused_naming_the_key():
    [problem] = memory_problems(dataclasses.replace(STUDY, log_prob_micro=16))
    assert "verl.log_prob_micro_batch_size_per_gpu 16" in problem and "~144.1 GiB per GPU" in problem
    assert "logits 117.4" in problem and "padded logits" in problem
    assert problem.endswith("set verl.log_prob_micro_batch_size_per_gpu to at most 8 (now 16)")


def test_the_3b_on_one_gpu_without_offload_is_refused_naming_the_keys():
    one = dataclasses.replace(STUDY, gpus=1, update_sequences_per_gpu=640)
    problems = memory_problems(one)
    rollout = next(p for p in problems if p.startswith("vLLM's share"))
    assert "~101.0 GiB per GPU" in rollout  # 14 fp32 parameters + 28 AdamW + 7 reference + 48 vLLM + 4
    for key in ("verl.gpu_memory_utilization 0.6 to at most 0.33", "verl.param_offload: true",
                "verl.optimizer_offload: true", "verl.n_gpus_per_node; 1 now"):  # fmt: skip
        assert key in rollout
    update = next(p for p in problems if p.startswith("the update"))
    assert "set verl.ppo_micro_batch_size_per_gpu to at most 1" in update


def test_remove_padding_and_fused_kernels_cost_less_in_the_update():
    assert LOGITS_BYTES_PER_ELEMENT["remove_padding", "update"] < LOGITS_BYTES_PER_ELEMENT["padded", "update"]
    fused = dataclasses.replace(STUDY, logits_path="fused", log_prob_micro=16)
    assert job_phases(fused)[1].part("logits") == 0 and memory_problems(fused) == []
