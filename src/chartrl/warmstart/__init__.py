"""The supervised warm start: a floor above the rollout and the model, since its demonstrations are built with the
rollout's own token builder and checked with greedy rollouts.

- chartrl.warmstart.supervised   demonstrations from the train split and the supervised training loop
- chartrl.warmstart.check        the after-warm-start check: greedy and sampled rollouts next to their controls
"""
