"""The trainer's side of the server's sessions (``/v1/sessions``): every HTTP call the multi-turn
rollouts make, in this one module, so a change of the session contract is one edit here.

A session is one persistent, sandboxed Python process on the reward server; a trajectory gets one,
runs its code blocks in it (names and imports persist between its turns), and the sessions of a
rollout chunk are opened together and released together by :func:`open_sessions`, whatever
raises in between.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict

from reward_server.sessions.models import ELSEWHERE, session_route

ExecStatus = Literal["ok", "error", "timeout", "session_lost"]


class ExecError(BaseModel):
    """The exception a session's code raised (traceback without the runner's frames)."""

    model_config = ConfigDict(extra="ignore")

    type: str = ""
    message: str = ""
    traceback: str = ""


class ExecResult(BaseModel):
    """One ``POST /v1/sessions/{id}/execute`` answer, as the server sends it."""

    model_config = ConfigDict(extra="ignore")

    status: ExecStatus
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    error: ExecError | None = None
    time_s: float = 0.0
    cpu_s: float = 0.0


class SessionError(RuntimeError):
    """The server refused or failed a session call (not the candidate's code failing: that is an
    ``ExecResult`` with status ``error``)."""


class SessionClient:
    """Synchronous httpx client for one reward server's sessions.

    Generation is synchronous PyTorch code that waits on each turn's outputs anyway, so a plain
    ``httpx.Client`` is the right shape; 429 (capacity) and connection errors are retried with
    ``Retry-After`` or a short backoff, other 4xx/5xx raise :class:`SessionError`.
    """

    def __init__(self, base_url: str, token: str | None = None, timeout_s: float = 60.0, retries: int = 3):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)
        self._retries = retries

    def _call(self, method: str, path: str, body: dict | None = None) -> httpx.Response:
        for attempt in range(self._retries + 1):
            try:
                r = self._http.request(method, path, json=body, headers=session_route(path))
            except httpx.TransportError as e:
                if attempt == self._retries:
                    raise SessionError(f"{method} {path}: {type(e).__name__}: {e}") from e
                time.sleep(0.2 * 2**attempt)
                continue
            if r.status_code in (429, 503) and attempt < self._retries:
                time.sleep(min(float(r.headers.get("Retry-After", 0.5 * 2**attempt) or 0.5), 5.0))
                continue
            return r
        raise AssertionError("unreachable")

    def create(self, labels: dict[str, str] | None = None, ttl_s: float | None = None,
               idle_timeout_s: float | None = None) -> str:
        """Open a Python session; returns its id."""
        body: dict = {"language": "python"}
        if labels:
            body["labels"] = labels
        if ttl_s is not None:
            body["ttl_s"] = ttl_s
        if idle_timeout_s is not None:
            body["idle_timeout_s"] = idle_timeout_s
        r = self._call("POST", "/v1/sessions", body)
        if r.status_code not in (200, 201):
            raise SessionError(f"POST /v1/sessions: HTTP {r.status_code}: {r.text[:300]}")
        return str(r.json()["session_id"])

    def execute(self, session_id: str, code: str, timeout_s: float | None = None) -> ExecResult:
        """Run ``code`` in the session. A lost or expired session (404/410) comes back as
        ``session_lost``: that trajectory's tool failed, the rollout goes on."""
        body: dict = {"code": code}
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        r = self._call("POST", f"/v1/sessions/{session_id}/execute", body)
        if r.status_code in (404, 410) or (r.status_code == 503 and ELSEWHERE in r.text):  # its server is gone
            return ExecResult(status="session_lost", stderr=r.text[:300])
        if r.status_code != 200:
            raise SessionError(f"POST /v1/sessions/{session_id}/execute: HTTP {r.status_code}: {r.text[:300]}")
        return ExecResult.model_validate(r.json())

    def delete(self, session_id: str) -> None:
        """Release the session (idempotent on the server: an unknown id is fine)."""
        r = self._call("DELETE", f"/v1/sessions/{session_id}")
        if r.status_code not in (200, 202, 204, 404):
            raise SessionError(f"DELETE /v1/sessions/{session_id}: HTTP {r.status_code}: {r.text[:300]}")

    def list_ids(self, label: str) -> list[str]:
        """Ids of the live sessions carrying ``label`` (``key=value``): what an orphan sweep reads."""
        r = self._http.get("/v1/sessions", params={"label": label})
        if r.status_code != 200:
            raise SessionError(f"GET /v1/sessions?label={label}: HTTP {r.status_code}: {r.text[:300]}")
        data = r.json()
        rows = data.get("sessions", data) if isinstance(data, dict) else data
        return [str(s["session_id"]) for s in rows]

    def close(self) -> None:
        self._http.close()


@contextmanager
def open_sessions(client: SessionClient, n: int, labels: dict[str, str],
                  idle_timeout_s: float | None = None) -> Iterator[list[str]]:
    """``n`` sessions opened together and released together: on success, and when opening one of
    them, the generation between, or anything else raises (the ones already opened are deleted).
    A failed release is retried once per id and never hides the exception that ended the block."""
    ids: list[str] = []
    try:
        for _ in range(n):
            ids.append(client.create(labels, idle_timeout_s=idle_timeout_s))
        yield ids
    finally:
        failed: list[str] = []
        for sid in ids:
            try:
                client.delete(sid)
            except SessionError:
                failed.append(sid)
        for sid in failed:  # the server sweeps what still fails by its labels (TTL, idle timeout)
            try:
                client.delete(sid)
            except SessionError:
                pass
