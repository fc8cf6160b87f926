"""Rewards in modules of their own, one reward (or one family) per module: each module here registers its
reward with ``chartrl.rewards.register_reward`` and is imported with ``chartrl.rewards`` (every module in this
folder, nothing to list). A module here is code of the train jobs whose reward it defines only
(``chartrl.rewards.reward_sources``), so adding one reruns no other series. docs/rewards.md, "Add a reward", walks
through an example.
"""
