"""The GPU memory one verl job needs on each device, estimated from its settings and the model's sizes.

How verl 0.9.1 (the installed package) uses a GPU: the FSDP actor, the reference and vLLM share the same GPUs
(the hybrid engine, ``verl/workers/engine_workers.py``) and take turns, so a job's peak is its largest phase:

- **rollout**: vLLM holds ``verl.gpu_memory_utilization`` x the device (its weights and KV cache) beside what the FSDP
  engine keeps between phases: the actor's fp32 parameters unless ``verl.param_offload``, its AdamW states unless
  ``verl.optimizer_offload``, and the reference's bf16 parameters. vLLM asks for its share at start and each time
  it wakes for a rollout.
- **log-prob**: ``verl.log_prob_micro_batch_size_per_gpu`` sequences through the actor, whose logits verl turns into
  log-probabilities and their entropy (``verl/trainer/ppo/v1/trainer_base.py`` asks for ``calculate_entropy``),
  then through the reference without entropy (a smaller pass, not counted).
- **update**: ``verl.ppo_micro_batch_size_per_gpu`` sequences forward and backward with parameters, gradients and
  AdamW states on the GPU: offload moves them only between phases (``verl/workers/engine/base.py``,
  ``BaseEngineCtx``), so it does not lower this phase.

Every sequence is counted at the longest it can be (the prompt budget plus the response budget): on the padded
path (``sdpa``) a micro-batch is padded to its longest sequence, so one long episode sizes the whole micro-batch.
Sizes are bytes; ``chartrl plan`` prints GiB.
"""

from __future__ import annotations

from dataclasses import dataclass

from chartrl.verl_backend.architectures import Architecture

GIB = 1024**3

LOGITS_BYTES_PER_ELEMENT = {
    # (path, phase) -> bytes per element of the [sequences, tokens, vocabulary] logits at the phase's peak.
    # The padded path (verl/workers/engine/fsdp/transformer_impl.py, prepare_model_outputs, no remove-padding): the
    # entropy (verl/utils/torch_functional.py, entropy_from_logits) runs under bf16 autocast, whose softmax and
    # product come out in fp32 (torch's autocast op reference): bf16 logits 2 + softmax 4 + product 4.
    ("padded", "log-prob"): 10,
    # logits 2 + their unpadded copy (torch.cat of the rows) 2 + each row's fp32 log_softmax, kept for the
    # backward by logprobs_from_logits_v2's per-token loop 4
    ("padded", "update"): 8,
    # remove-padding (flash-attn): the same entropy on [tokens, vocabulary]; the update holds the bf16 logits, into
    # which flash-attn's cross-entropy writes its gradient in place
    ("remove_padding", "log-prob"): 10,
    ("remove_padding", "update"): 2,
    # verl's fused kernels (actor_rollout_ref.model.use_fused_kernels=True) compute log-probabilities and entropy
    # chunk by chunk from the hidden states: no logits tensor
    ("fused", "log-prob"): 0,
    ("fused", "update"): 0,
}
TEMPERATURE_COPY_BYTES = 2
"""A sampling temperature other than 1 divides the logits into a new bf16 tensor (``_scale_logits_by_temperature``)."""

LAYER_ACTIVATION_BYTES = 34
"""Bytes per token and hidden unit one transformer layer keeps for its backward in 16-bit: 34 s b h (Korthikanti
et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", eq. 1), without the 5 a s^2 b of
attention scores, which torch's memory-efficient sdpa kernel and flash-attn do not store."""

RUNTIME_RESERVE_GIB = 4.0
"""Chosen, not measured: the CUDA context (~0.5 GiB), NCCL buffers, the sleeping vLLM engine's CUDA graphs and the
caching allocator's fragmentation, which no formula here counts."""


@dataclass(frozen=True)
class JobShape:
    """What one verl job's memory per GPU depends on: its model, its GPUs and its settings."""

    architecture: Architecture
    gpus: int
    """FSDP shards parameters, gradients and AdamW states over every GPU of the job (nnodes x n_gpus_per_node)."""
    device_gib: float
    trains: bool
    """A train job has log-prob and update phases; a generation job (val_only) only rolls out."""
    lora_parameters: int
    """The LoRA adapters' parameters (0 for full-parameter training): then only they have gradients and AdamW
    states, beside the frozen base."""
    reference: bool
    """A separate reference model: the KL term is on and the policy is not LoRA (LoRA's reference is the base)."""
    param_offload: bool
    optimizer_offload: bool
    vllm_share: float
    longest: int
    """The longest sequence: prompt budget + response budget, in tokens."""
    image_tokens: int
    """Image tokens one sequence can hold (the prompt's chart and the edited charts), for the vision tower."""
    log_prob_micro: int
    update_micro: int
    update_sequences_per_gpu: int
    """Sequences each GPU gets per mini-batch: the update micro-batch must divide it."""
    logits_path: str
    """``padded``, ``remove_padding`` or ``fused`` (:data:`LOGITS_BYTES_PER_ELEMENT`)."""
    temperature_copy: bool
    checkpointing: bool

    @property
    def trainable(self) -> int:
        """Parameters with gradients and AdamW states."""
        return self.lora_parameters or self.architecture.parameters


@dataclass(frozen=True)
class Phase:
    """One phase's memory per GPU, part by part (bytes)."""

    name: str
    parts: tuple[tuple[str, float], ...]

    @property
    def total(self) -> float:
        return sum(size for _, size in self.parts)

    def part(self, name: str) -> float:
        return sum(size for what, size in self.parts if what == name)


# -- the pieces, one formula each ----------------------------------------------------------------------------------


def actor_parameter_bytes(parameters: int, gpus: int) -> float:
    """fp32 parameters sharded over the GPUs: ``4 P / N`` (verl trains in fp32 with bf16 compute:
    ``FSDPEngineConfig.model_dtype`` "fp32", mixed-precision ``param_dtype`` bf16)."""
    return 4 * parameters / gpus


def gradient_bytes(trainable: int, gpus: int) -> float:
    """fp32 gradients of the trainable parameters, sharded: ``4 T / N``."""
    return 4 * trainable / gpus


def adam_bytes(trainable: int, gpus: int) -> float:
    """AdamW's two fp32 moments per trainable parameter, sharded: ``8 T / N``."""
    return 8 * trainable / gpus


def reference_bytes(parameters: int, gpus: int) -> float:
    """The reference model in bf16 (a forward-only engine), sharded: ``2 P / N``."""
    return 2 * parameters / gpus


def gathered_unit_bytes(architecture: Architecture) -> float:
    """FSDP all-gathers one unit at a time in bf16; the largest is the root unit with the embedding (and the
    untied head): ``2 V h`` (x 2 untied)."""
    return 2 * architecture.embedding_parameters


def logits_bytes(sequences: int, tokens: int, vocab: int, bytes_per_element: float) -> float:
    """The logits of ``sequences`` x ``tokens`` over the vocabulary at the phase's bytes per element."""
    return sequences * tokens * vocab * bytes_per_element


def checkpointed_activation_bytes(sequences: int, tokens: int, hidden: int, layers: int, checkpointing: bool) -> float:
    """Activations kept for the backward: with gradient checkpointing each layer's bf16 input (``2 s h`` per layer)
    plus the one layer being recomputed (``34 s h``); without it every layer's ``34 s h``."""
    size = sequences * tokens * hidden
    if checkpointing:
        return layers * 2 * size + LAYER_ACTIVATION_BYTES * size
    return layers * LAYER_ACTIVATION_BYTES * size


def forward_activation_bytes(sequences: int, tokens: int, hidden: int) -> float:
    """A forward without gradients keeps one layer's temporaries at a time: at most ``34 s h``."""
    return LAYER_ACTIVATION_BYTES * sequences * tokens * hidden


def vision_patches(image_tokens: int) -> int:
    """Patches the vision tower runs for ``image_tokens`` merged tokens (its merger joins 2 x 2 patches)."""
    return 4 * image_tokens


def vllm_bytes(share: float, device_gib: float) -> float:
    """vLLM's memory: ``gpu_memory_utilization`` x the device (vLLM sizes its KV cache to fill it)."""
    return share * device_gib * GIB


# -- the phases ------------------------------------------------------------------------------------------------------


def _logits_per_element(shape: JobShape, phase: str) -> float:
    per_element = LOGITS_BYTES_PER_ELEMENT[shape.logits_path, phase]
    return per_element + (TEMPERATURE_COPY_BYTES if per_element and shape.temperature_copy else 0)


def _states(shape: JobShape, *, parameters: bool, optimizer: bool, gradients: bool) -> list[tuple[str, float]]:
    arch, n = shape.architecture, shape.gpus
    parts = []
    if parameters:
        parts.append(("actor parameters", actor_parameter_bytes(arch.parameters + shape.lora_parameters, n)))
    if gradients:
        parts.append(("gradients", gradient_bytes(shape.trainable, n)))
    if optimizer and shape.trains:
        parts.append(("AdamW states", adam_bytes(shape.trainable, n)))
    if shape.reference:
        parts.append(("reference", reference_bytes(arch.parameters, n)))
    return parts


def _reserve() -> tuple[str, float]:
    return ("runtime reserve", RUNTIME_RESERVE_GIB * GIB)


def rollout_phase(shape: JobShape) -> Phase:
    """vLLM's share beside the FSDP engine's resident states."""
    states = _states(shape, parameters=not shape.param_offload, optimizer=not shape.optimizer_offload, gradients=False)
    return Phase("rollout", (*states, ("vLLM", vllm_bytes(shape.vllm_share, shape.device_gib)), _reserve()))


def log_prob_phase(shape: JobShape) -> Phase:
    """The actor's forward over one log-prob micro-batch: its parameters (loaded even when offloaded), the optimizer
    unless offloaded, the reference, one gathered unit, one layer's temporaries and the logits with their entropy."""
    arch, m, tokens = shape.architecture, shape.log_prob_micro, shape.longest
    states = _states(shape, parameters=True, optimizer=not shape.optimizer_offload, gradients=False)
    patches = vision_patches(shape.image_tokens)
    return Phase(
        "log-prob",
        (
            *states,
            ("gathered unit", gathered_unit_bytes(arch)),
            ("activations", forward_activation_bytes(m, tokens, arch.hidden_size)),
            ("vision activations", forward_activation_bytes(m, patches, arch.vision_hidden_size)),
            ("logits", logits_bytes(m, tokens, arch.vocab_size, _logits_per_element(shape, "log-prob"))),
            _reserve(),
        ),
    )


def update_phase(shape: JobShape) -> Phase:
    """Forward and backward of one update micro-batch with parameters, gradients and AdamW states loaded."""
    arch, m, tokens = shape.architecture, shape.update_micro, shape.longest
    states = _states(shape, parameters=True, optimizer=True, gradients=True)
    patches = vision_patches(shape.image_tokens)
    layers, depth = arch.num_hidden_layers, arch.vision_depth
    return Phase(
        "update",
        (
            *states,
            ("gathered unit", gathered_unit_bytes(arch)),
            ("activations", checkpointed_activation_bytes(m, tokens, arch.hidden_size, layers, shape.checkpointing)),
            (
                "vision activations",
                checkpointed_activation_bytes(m, patches, arch.vision_hidden_size, depth, shape.checkpointing),
            ),
            ("logits", logits_bytes(m, tokens, arch.vocab_size, _logits_per_element(shape, "update"))),
            _reserve(),
        ),
    )


def job_phases(shape: JobShape) -> list[Phase]:
    """Every phase of the job: the rollout, and for a train job the log-prob pass and the update."""
    if not shape.trains:
        return [rollout_phase(shape)]
    return [rollout_phase(shape), log_prob_phase(shape), update_phase(shape)]


def peak_phase(shape: JobShape) -> Phase:
    return max(job_phases(shape), key=lambda phase: phase.total)


# -- what to change when a phase does not fit ------------------------------------------------------------------------


def largest_fitting_micro_batch(phase: Phase, micro: int, device_gib: float) -> int:
    """The most sequences per micro-batch that fit: the parts that grow with the micro-batch (activations and
    logits) scale linearly from ``micro`` sequences; 0 when even one does not fit."""
    growing = sum(size for what, size in phase.parts if "activations" in what or what == "logits")
    fixed = phase.total - growing
    per_sequence = growing / micro
    room = device_gib * GIB - fixed
    return max(0, int(room // per_sequence)) if per_sequence else micro


def _gib(size: float) -> str:
    return f"{size / GIB:.1f}"


def _breakdown(phase: Phase) -> str:
    largest = sorted((p for p in phase.parts if p[1] > 0), key=lambda p: -p[1])[:4]
    return ", ".join(f"{what} {_gib(size)}" for what, size in largest)


def rollout_fixes(shape: JobShape, phase: Phase) -> list[str]:
    resident = phase.total - phase.part("vLLM")
    share = int((shape.device_gib * GIB - resident) / (shape.device_gib * GIB) * 100) / 100
    fixes = []
    if share >= 0.2:
        fixes.append(f"lower verl.gpu_memory_utilization {shape.vllm_share} to at most {share:.2f}")
    if not shape.param_offload:
        fixes.append("set verl.param_offload: true")
    if not shape.optimizer_offload and shape.trains:
        fixes.append("set verl.optimizer_offload: true")
    fixes.append(f"spread the model over more GPUs (verl.n_gpus_per_node; {shape.gpus} now)")
    return fixes


def log_prob_fixes(shape: JobShape, phase: Phase) -> list[str]:
    fitting = largest_fitting_micro_batch(phase, shape.log_prob_micro, shape.device_gib)
    if fitting >= 1:
        return [f"set verl.log_prob_micro_batch_size_per_gpu to at most {fitting} (now {shape.log_prob_micro})"]
    return [
        "even one sequence does not fit: shorten the sequences (verl.max_prompt_length, rollout.max_new_tokens)",
        f"or spread the model over more GPUs (verl.n_gpus_per_node; {shape.gpus} now)",
    ]


def update_fixes(shape: JobShape, phase: Phase) -> list[str]:
    fitting = largest_fitting_micro_batch(phase, shape.update_micro, shape.device_gib)
    divisors = [d for d in range(1, fitting + 1) if shape.update_sequences_per_gpu % d == 0]
    if divisors:
        return [
            f"set verl.ppo_micro_batch_size_per_gpu to at most {divisors[-1]} (now {shape.update_micro}; it must "
            f"divide the {shape.update_sequences_per_gpu} sequences each GPU updates per mini-batch)"
        ]
    states = sum(size for what, size in phase.parts if what in ("actor parameters", "gradients", "AdamW states"))
    return [
        f"even one sequence does not fit beside {_gib(states)} GiB of parameters, gradients and AdamW states per "
        f"GPU: spread them over more GPUs (verl.n_gpus_per_node; {shape.gpus} now) or train LoRA adapters "
        "(train.lora.enabled: true)"
    ]


FIXES = {"rollout": rollout_fixes, "log-prob": log_prob_fixes, "update": update_fixes}
"""Phase name -> the keys that lower it, most direct first."""

WHAT_GROWS = {
    "rollout": "vLLM's share beside the resident FSDP states",
    "log-prob": "the log-probability and entropy pass over verl.log_prob_micro_batch_size_per_gpu {micro} sequences",
    "update": "the update of verl.ppo_micro_batch_size_per_gpu {micro} sequences",
}


def memory_problems(shape: JobShape) -> list[str]:
    """One line per phase whose estimate exceeds the device: the phase, its largest parts, the keys to change."""
    problems = []
    for phase in job_phases(shape):
        if phase.total <= shape.device_gib * GIB:
            continue
        micro = shape.log_prob_micro if phase.name == "log-prob" else shape.update_micro
        what = WHAT_GROWS[phase.name].format(micro=micro)
        sizes = (
            ""
            if phase.name == "rollout"
            else f"; sequences of up to {shape.longest} tokens, {shape.logits_path} logits"
        )
        problems.append(
            f"{what} needs ~{_gib(phase.total)} GiB per GPU, more than verl.gpu_memory_gb {shape.device_gib:g} "
            f"({_breakdown(phase)} GiB{sizes}); " + "; or ".join(FIXES[phase.name](shape, phase))
        )
    return problems
