"""Drop-in compatibility with other RL stacks; the stable import names.

Server side (routes of the app, `reward_server.routes`): SandboxFusion's `POST /run_code`,
`POST /submit` and `GET /v1/ping`, and OpenRLHF's remote reward model `POST /get_reward`.
Client side (`reward_server.integrations`, call the server over HTTP): a TRL `reward_funcs`
callable (`reward_server.compat.trl`) and verl's `compute_score` (`reward_server.compat.verl`).
"""
