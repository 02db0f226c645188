"""Re-export of `reward_server.integrations.trl` under the name the README and users rely on."""

from reward_server.integrations.trl import make_async_trl_reward_func, make_trl_reward_func

__all__ = ["make_async_trl_reward_func", "make_trl_reward_func"]
