"""Training and rollout observability utilities (stand-in)."""
