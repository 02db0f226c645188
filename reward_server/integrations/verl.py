"""verl: `compute_score` for `custom_reward_function` (and the batch form for verl's
`BatchRewardManager`), scoring through the reward server over HTTP.

```yaml
custom_reward_function:          # verl >= 0.6 reads reward.custom_reward_function.*
  path: pkg://reward_server.compat.verl   # newer verl; any verl: $(reward-server integrations verl-path)
  name: compute_score            # or compute_score_batch with reward_model.reward_manager=batch
  reward_kwargs: {server_url: "http://127.0.0.1:8000"}   # or set REWARD_SERVER_URL
```

`ground_truth` may be verl's code format `{"inputs": [...], "outputs": [...], "fn_name"?}`
(stdio, or call-based with `fn_name`), our task (dict or JSON string), or a math answer
string, or the data set's own row where `data_source` names a data set we read
(`reward_server.datasets`: "deepmind/code_contests", "livecodebench", "open-r1/codeforces",
...). `extra_info["task"]`, when present, wins. Every result dict has the same keys
(`score`, `acc`, `passed`, `total`, `infra_error`, `task_error`) so verl can tabulate them; an
infra or task error scores `infra_error_score` (verl needs a number) and sets its key to 1.
`datasets` / pandas values (numpy arrays, struct columns with nulls) are taken as they come.
"""

from __future__ import annotations

import threading
from typing import Any

from reward_server.client import RewardClient, ScoreResult
from reward_server.labels import plain, server_token, task_of
from reward_server.labels import server_url as _default_url

_clients: dict[tuple, RewardClient] = {}
_lock = threading.Lock()


def _client(url: Any, token: str | None, timeout: float) -> RewardClient:
    key = (tuple(url) if isinstance(url, list) else url, token, timeout)
    with _lock:
        cl = _clients.get(key)
        if cl is None:
            cl = _clients[key] = RewardClient(url, token=token, timeout=timeout)
        return cl


def _task(ground_truth: Any, extra_info: Any, data_source: Any = None) -> Any:
    extra_info = plain(extra_info)  # verl hands over numpy object arrays' elements
    if isinstance(extra_info, dict) and extra_info.get("task") is not None:
        return task_of(extra_info["task"], data_source)
    return task_of(ground_truth, data_source)


def _as_dict(r: ScoreResult, infra_error_score: float) -> dict[str, Any]:
    if r.reward is None:  # infra_error, task_error (the task's tests cannot run) or queue_timeout: no score to give
        return {"score": float(infra_error_score), "acc": 0.0, "passed": 0, "total": 0,
                "infra_error": int(r.status == "infra_error"), "task_error": int(r.status == "task_error"),
                "queue_timeout": int(r.status == "queue_timeout")}
    code = r.code
    if code is not None:
        passed, total = code.passed, code.total
    else:  # a math item: one answer, right or not
        passed, total = int(r.reward >= 1.0), 1
    return {"score": float(r.reward), "acc": float(r.reward >= 1.0), "passed": passed, "total": total, "infra_error": 0,
            "task_error": 0, "queue_timeout": 0}


def compute_score_batch(
    data_sources: list[Any],
    solution_strs: list[str],
    ground_truths: list[Any],
    extra_infos: list[Any] | None = None,
    server_url: str | list[str] | None = None,
    token: str | None = None,
    weights: dict | None = None,
    timeout: float = 600.0,
    infra_error_score: float = 0.0,
    queue_timeout_s: float | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    extra_infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    items = [
        {"completion": s, "task": _task(g, e, d)}
        for s, g, e, d in zip(solution_strs, ground_truths, extra_infos, list(data_sources), strict=True)
    ]
    cl = _client(_default_url(server_url), server_token(token), timeout)
    return [_as_dict(r, infra_error_score) for r in cl.score(items, weights=weights, queue_timeout_s=queue_timeout_s)]


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    server_url: str | list[str] | None = None,
    token: str | None = None,
    weights: dict | None = None,
    timeout: float = 600.0,
    infra_error_score: float = 0.0,
    queue_timeout_s: float | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    return compute_score_batch(
        [data_source], [solution_str], [ground_truth], [extra_info], server_url=server_url, token=token,
        weights=weights, timeout=timeout, infra_error_score=infra_error_score, queue_timeout_s=queue_timeout_s,
    )[0]

