"""The reward definitions, one module per reward (or family): each registers its reward with
``chartrl.rewards.register_reward`` and is imported by name with ``chartrl.rewards`` (every module in this folder,
nothing to list). A module here is code of the jobs that use its reward only (``chartrl.rewards.reward_module``):
the series trained with it and the scorers built on it, so changing one reward reruns only those, and adding one
reruns nothing. docs/rewards.md, "Add a reward", walks through an example.
"""
