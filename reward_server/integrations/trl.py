"""TRL: `reward_funcs` callables that score through the reward server.

```python
from reward_server.compat.trl import make_trl_reward_func
trainer = GRPOTrainer(model=..., reward_funcs=[make_trl_reward_func("http://127.0.0.1:8000")],
                      train_dataset=ds)   # ds has a "task" column: our task (dict or JSON string)
# or a data set's own rows: make_trl_reward_func(url, dataset="deepmind/code_contests")
```

TRL calls `reward_func(prompts=..., completions=..., **columns)`; completions may be
strings or conversational (`[{"role": "assistant", "content": ...}]`). The function returns
one float per completion, or `None` where no reward was given (an infra_error, a task_error, or a
`queue_timeout` past `queue_timeout_s`: TRL ignores those).
`make_async_trl_reward_func` returns the `async def` form for TRL versions that run reward
functions concurrently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from reward_server.client import AsyncRewardClient, RewardClient
from reward_server.datasets import format_of
from reward_server.labels import completion_text, server_token, server_url, task_of

_NOT_COLUMNS = ("trainer_state", "completion_ids", "log_extra", "log_metric")  # TRL's own keyword arguments


def _rows(kwargs: dict[str, Any], n: int) -> list[dict]:
    """The data set's rows back from the columns TRL passes one list each."""
    cols = {k: v for k, v in kwargs.items() if k not in _NOT_COLUMNS and isinstance(v, list | tuple) and len(v) == n}
    return [{k: v[i] for k, v in cols.items()} for i in range(n)]


def _items(completions: list[Any], kwargs: dict[str, Any], task_column: str, dataset: str | None = None) -> list[dict]:
    """One item per completion: its task from the task column, or (with `dataset`, or a
    `data_source` column naming a data set) from the row's own columns (reward_server.datasets)."""
    n = len(completions)
    column = kwargs.get("data_source")
    column = list(column) if isinstance(column, list | tuple) and len(column) == n else [None] * n
    sources = [s if format_of(s) is not None else dataset for s in column]
    if task_column in kwargs:
        tasks = kwargs[task_column]
    elif any(format_of(s) for s in sources):
        tasks = _rows(kwargs, n)
    else:
        cols = sorted(k for k in kwargs if k not in _NOT_COLUMNS)
        raise KeyError(f"dataset column {task_column!r} (the tasks) not passed to the reward function; columns: {cols}")
    if len(tasks) != n:
        raise ValueError(f"{n} completions but {len(tasks)} tasks")
    return [{"completion": completion_text(c), "task": task_of(t, s)}
            for c, t, s in zip(completions, tasks, sources, strict=True)]


def make_trl_reward_func(
    base_url: str | list[str] | None = None,
    task_column: str = "task",
    weights: dict | None = None,
    extract: dict | None = None,
    token: str | None = None,
    timeout: float = 600.0,
    max_batch: int = 512,
    name: str = "verireward",
    queue_timeout_s: float | None = None,
    client: RewardClient | None = None,
    dataset: str | None = None,
) -> Callable[..., list[float | None]]:
    """A TRL reward function; the server URL defaults to `$REWARD_SERVER_URL`. With `dataset`
    (a format or Hub id `reward_server.datasets` reads), the tasks are the data set's own rows."""
    cl = client or RewardClient(server_url(base_url), token=server_token(token), timeout=timeout, max_batch=max_batch)

    def reward_func(prompts: list[Any] | None = None, completions: list[Any] | None = None, **kwargs: Any) -> list[float | None]:
        completions = list(completions or [])
        if not completions:
            return []
        results = cl.score(_items(completions, kwargs, task_column, dataset), weights=weights, extract=extract, queue_timeout_s=queue_timeout_s)
        return [r.reward for r in results]

    reward_func.__name__ = name
    reward_func.__qualname__ = name
    reward_func.client = cl  # type: ignore[attr-defined]
    return reward_func


def make_async_trl_reward_func(
    base_url: str | list[str] | None = None,
    task_column: str = "task",
    weights: dict | None = None,
    extract: dict | None = None,
    token: str | None = None,
    timeout: float = 600.0,
    max_batch: int = 512,
    name: str = "verireward",
    queue_timeout_s: float | None = None,
    dataset: str | None = None,
):
    """The `async def` variant. One client per event loop (httpx clients are loop-bound)."""
    url, tok = server_url(base_url), server_token(token)
    clients: dict[int, AsyncRewardClient] = {}

    async def reward_func(prompts: list[Any] | None = None, completions: list[Any] | None = None, **kwargs: Any) -> list[float | None]:
        completions = list(completions or [])
        if not completions:
            return []
        loop_id = id(asyncio.get_running_loop())
        cl = clients.get(loop_id)
        if cl is None:
            cl = clients[loop_id] = AsyncRewardClient(url, token=tok, timeout=timeout, max_batch=max_batch)
        results = await cl.score(_items(completions, kwargs, task_column, dataset), weights=weights, extract=extract, queue_timeout_s=queue_timeout_s)
        return [r.reward for r in results]

    reward_func.__name__ = name
    reward_func.__qualname__ = name
    return reward_func
