"""verl: a multi-turn code-interpreter tool (`BaseTool`) backed by the reward server's sessions.

```yaml
# actor_rollout_ref.rollout.multi_turn.tool_config_path: tools.yaml
tools:
  - class_name: reward_server.integrations.verl_tool.SessionCodeTool
    config: {type: native, server_url: "http://127.0.0.1:8000", timeout_s: 10, idle_timeout_s: 120}
    # tool_schema: optional; the default is a `code_interpreter(code)` function
```

Its life cycle is verl's: `create` makes an instance (its session is opened on first use),
`execute` runs the `code` argument in the session (names, imports and files persist) and
answers what a notebook shows (stdout, the trailing expression's repr, the traceback),
`calc_reward` grades the session's program with the task given in `create_kwargs["task"]`
(our code task; `POST /v1/sessions/{id}/score`, graded as `/v1/score` grades a completion:
nothing the session's process did reaches the verdict) and `release` deletes the session.

verl >= 0.9's agent loop calls create, execute and release around every tool call and hands
`agent_data` to `execute`: then the session belongs to the trajectory (`agent_data.request_id`),
so state persists across its tool calls; such sessions end at their idle timeout, or when
`close_trajectory(request_id)` is called. Sessions carry the label `verl-tool=<tool name>` (and
`trajectory=<request id>`) for sweeping orphans (`GET /v1/sessions?label=...`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.rollout_trace import rollout_trace_op

from reward_server.client import AsyncRewardClient, RewardServerError, SessionExecResult
from reward_server.labels import server_token, server_url, task_of
from reward_server.sessions.models import ELSEWHERE

DEFAULT_SCHEMA = {
    "type": "function",
    "function": {
        "name": "code_interpreter",
        "description": "Run Python code in a persistent interpreter: names, imports and files persist between "
                       "calls. Answers with what the code printed and the value of its last expression.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "Python code"}},
                       "required": ["code"]},
    },
}


@dataclass
class _Instance:
    session_id: str | None = None
    trajectory: str | None = None
    task: Any = None
    labels: dict[str, str] = field(default_factory=dict)


def render(res: SessionExecResult, max_chars: int) -> str:
    """An execute as the model reads it: stdout, the trailing value, the error or what ended it."""
    parts = [res.stdout]
    if res.result is not None:
        parts.append(res.result + "\n")
    if res.error is not None and res.status == "error":
        parts.append(res.error.traceback or f"{res.error.type}: {res.error.message}\n")
    if res.stderr:
        parts.append(res.stderr)
    if res.status == "timeout":
        parts.append(f"[interrupted: {res.message or 'time limit'}]\n")
    elif res.status == "session_lost":
        parts.append(f"[the interpreter was lost ({res.message}); its state is gone]\n")
    text = "".join(parts)
    return text if len(text) <= max_chars else text[:max_chars] + "...(truncated)"


class SessionCodeTool(BaseTool):
    """A Python interpreter per trajectory, on the reward server (config: `server_url` or
    $REWARD_SERVER_URL, `token`, `timeout_s`, `ttl_s`, `idle_timeout_s`, `memory_mb`, `runtime`,
    `max_output_chars`, `per_trajectory`)."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        self._schema = OpenAIFunctionToolSchema.model_validate(DEFAULT_SCHEMA)
        super().__init__(config, tool_schema or self._schema)
        self.url = server_url(config.get("server_url"))
        self.token = server_token(config.get("token"))
        self.timeout_s = float(config.get("timeout_s", 10))
        self.max_output_chars = int(config.get("max_output_chars", 8192))
        self.per_trajectory = bool(config.get("per_trajectory", True))
        self.open_options = {k: config[k] for k in ("ttl_s", "idle_timeout_s", "memory_mb", "runtime") if k in config}
        self.open_options.setdefault("idle_timeout_s", 120)
        self._instances: dict[str, _Instance] = {}
        self._trajectories: dict[str, str] = {}  # request id -> session id
        self._clients: dict[int, AsyncRewardClient] = {}

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return self.tool_schema if getattr(self, "tool_schema", None) is not None else self._schema

    def _client(self) -> AsyncRewardClient:
        """One client per event loop (httpx's async clients are bound to theirs)."""
        key = id(asyncio.get_running_loop())
        cl = self._clients.get(key)
        if cl is None:
            cl = self._clients[key] = AsyncRewardClient(self.url, token=self.token, timeout=self.timeout_s + 60)
        return cl

    async def _open(self, labels: dict[str, str]) -> str:
        made = await self._client().open_session(labels={"verl-tool": self.name, **labels}, **self.open_options)
        return made.session_id

    async def _session(self, inst: _Instance) -> str:
        if inst.trajectory is not None:
            sid = self._trajectories.get(inst.trajectory)
            if sid is None:
                sid = self._trajectories[inst.trajectory] = await self._open({**inst.labels, "trajectory": inst.trajectory})
            inst.session_id = sid
            return sid
        if inst.session_id is None:
            inst.session_id = await self._open(inst.labels)
        return inst.session_id

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """An instance; `create_kwargs` may carry `task` (for calc_reward) and `labels`."""
        iid = instance_id or str(uuid4())
        opts = dict(kwargs.get("create_kwargs") or {})
        opts.update({k: v for k, v in kwargs.items() if k in ("task", "labels")})
        self._instances[iid] = _Instance(task=opts.get("task"), labels={str(k): str(v) for k, v in
                                                                         (opts.get("labels") or {}).items()})
        return iid, ToolResponse()

    @rollout_trace_op
    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        inst = self._instances.get(instance_id)
        if inst is None:
            inst = self._instances[instance_id] = _Instance()
        agent_data = kwargs.get("agent_data")
        rid = getattr(agent_data, "request_id", None)
        if self.per_trajectory and rid is not None:
            inst.trajectory = str(rid)
            if inst.task is None:  # verl's tools_kwargs: the trajectory's own create_kwargs
                inst.task = ((getattr(agent_data, "tools_kwargs", None) or {}).get(self.name, {})
                             .get("create_kwargs", {}).get("task"))
        code = parameters.get("code") if isinstance(parameters, dict) else None
        if not isinstance(code, str):
            return ToolResponse(text="error: the `code` argument (a string of Python) is missing"), 0.0, {}
        try:
            sid = await self._session(inst)
            res = await self._client().execute(sid, code, timeout_s=self.timeout_s)
        except RewardServerError as e:
            gone = e.status_code == 404 or (e.status_code == 503 and ELSEWHERE in str(e))  # ended, or its server
            if inst.trajectory is not None and gone:  # the next call opens anew
                self._trajectories.pop(inst.trajectory, None)
            return ToolResponse(text=f"error: the interpreter is unavailable ({e})"), 0.0, {"status": "unavailable"}
        if res.status == "session_lost":
            if inst.trajectory is not None:
                self._trajectories.pop(inst.trajectory, None)
            await self._client().close_session(sid)
            inst.session_id = None
        return (ToolResponse(text=render(res, self.max_output_chars)), 0.0,
                {"status": res.status, "time_s": res.time_s, "cpu_s": res.cpu_s})

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The session's program graded with the instance's task (0.0 without a task, or where
        the server gave no reward: an infra or task error)."""
        inst = self._instances.get(instance_id)
        task = kwargs.get("task") or (inst.task if inst is not None else None)
        if inst is None or task is None:
            return 0.0
        sid = await self._session(inst)
        res = await self._client().score_session(sid, task_of(task))
        return float(res.reward) if res.reward is not None else 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Delete the instance's session (a trajectory's session outlives its tool calls)."""
        inst = self._instances.pop(instance_id, None)
        if inst is None or inst.session_id is None or inst.trajectory is not None:
            return
        await self._client().close_session(inst.session_id)

    async def close_trajectory(self, request_id: str) -> None:
        """End a trajectory's session (verl has no hook at a trajectory's end; else its idle timeout does)."""
        sid = self._trajectories.pop(str(request_id), None)
        if sid is not None:
            await self._client().close_session(sid)
