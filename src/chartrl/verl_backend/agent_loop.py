"""verl's tool agent loop with every generation pass capped at ``rollout.max_new_tokens``, as the local backend caps
each pass.

verl 0.9.1's ``ToolAgentLoop`` sends no ``max_tokens``, so its vLLM server lets a pass sample whatever is left of the
whole response budget (``min(response_length, prompt_length + response_length - len(prompt_ids))``,
``vllm_async_server.py``): the first pass of a tool series could sample 3,136 tokens where a no-tool series (whose
budget is one pass) samples at most 512. :class:`PassCappedToolAgentLoop` changes only that: each pass asks for at
most ``max_tokens_per_turn`` tokens, and never more than the response budget has left.

verl finds it by name (``chartrl_tool_agent``, each tool row's ``agent_name``) through
``actor_rollout_ref.rollout.agent.agent_loop_config_path`` (``agent_loops.yaml``, read by ``AgentLoopWorker`` into its
registry and built with ``hydra.utils.instantiate``), and reads the cap from
``actor_rollout_ref.rollout.custom.max_tokens_per_turn`` (verl's extension point for custom settings); both are set
by ``chartrl.verl_backend.overrides``.
"""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

from chartrl.verl_backend.overrides import MAX_TOKENS_PER_TURN, TOOL_AGENT


class PassCappedToolAgentLoop(ToolAgentLoop):
    """``ToolAgentLoop`` whose every generation pass samples at most ``max_tokens_per_turn`` tokens."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        custom = self.rollout_config.get("custom") or {}
        if MAX_TOKENS_PER_TURN not in custom:
            raise ValueError(
                f"actor_rollout_ref.rollout.custom.{MAX_TOKENS_PER_TURN} is not set; the {TOOL_AGENT} agent "
                "loop caps each pass at it (chartrl.verl_backend.overrides sets it from rollout.max_new_tokens)"
            )
        self.max_tokens_per_turn = int(custom[MAX_TOKENS_PER_TURN])

    def pass_budget(self, response_tokens: int) -> int:
        """Tokens the next pass may sample after ``response_tokens`` of the response (assistant and tool tokens):
        the per-pass cap, within what the response budget has left (at least 1, as vLLM requires)."""
        return max(1, min(self.max_tokens_per_turn, self.response_length - response_tokens))

    async def _handle_generating_state(self, agent_data, sampling_params: dict[str, Any], ignore_termination=False):
        capped = {**sampling_params, "max_tokens": self.pass_budget(len(agent_data.response_mask))}
        return await super()._handle_generating_state(agent_data, capped, ignore_termination)
