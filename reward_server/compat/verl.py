"""Re-export of `reward_server.integrations.verl`: verl's `custom_reward_function.path` may
point at this file (`name: compute_score` or `compute_score_batch`)."""

from reward_server.integrations.verl import compute_score, compute_score_batch

__all__ = ["compute_score", "compute_score_batch"]
