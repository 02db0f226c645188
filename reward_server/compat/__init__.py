"""Drop-in compatibility with other RL stacks.

Server side (routes of the app): SandboxFusion's `POST /run_code` (`sandbox_fusion`) and
OpenRLHF's remote reward model `POST /get_reward` (`openrlhf`).
Client side (call the server over HTTP): a TRL `reward_funcs` callable (`trl`) and verl's
`compute_score` (`verl`).
"""
