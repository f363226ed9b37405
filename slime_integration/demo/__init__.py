"""``tracking-core demo``: a slime-shaped PPO job on CPU (driver, actor group, critic group)."""
