"""The HTTP models of `/v1/sessions`: what a client sends and reads back. The sandbox's own
models (`sandbox.sessions`) are the execute's request and result; these add what only the
server keeps (ids that name their server, TTL, idle timeout, labels) and the listing."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reward_server.schemas import CodeTask
from reward_server.settings import Weights
from sandbox.sessions import SessionExec, SessionExecResult

__all__ = ["SessionCreate", "SessionCreated", "SessionExec", "SessionExecResult", "SessionInfo", "SessionList",
           "SessionScore", "parse_label_selector", "server_of"]

MAX_LABELS = 16
_LABEL_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,62}$")
_LABEL_VALUE_CHARS = 256
ID_SEP = "."  # a session id is "<server id>.<random hex>": the bundled client routes by the part before it
SERVER_ID_PATTERN = r"^[A-Za-z0-9_-]{1,32}$"


# sent with every call for a session: Ray Serve's proxy routes it to the replica that registered
# the id (model multiplexing, reward_server/deploy/ray.py); any other server ignores it
ROUTE_HEADER = "serve_multiplexed_model_id"
_SESSIONS_PATH = "/v1/sessions/"
# in the 503 for another server's id; once retries run out it means the session's server is gone
# (restarted, or its replica replaced): a client treats the session as lost
ELSEWHERE = "session_elsewhere"
ID_HEX = 16  # random bytes in an id, after the server id and ID_SEP
_ID_FORM = re.compile(SERVER_ID_PATTERN[:-1] + re.escape(ID_SEP) + f"[0-9a-f]{{{2 * ID_HEX}}}$")


def well_formed(session_id: str) -> bool:
    """Shaped as a server gives ids (`<server id>.<32 hex>`)."""
    return _ID_FORM.match(session_id) is not None


def session_route(path: str) -> dict[str, str] | None:
    """The routing header for a request to `/v1/sessions/{id}[/...]`, None for any other path."""
    if not path.startswith(_SESSIONS_PATH):
        return None
    sid = path[len(_SESSIONS_PATH):].split("/", 1)[0]
    return {ROUTE_HEADER: sid} if sid else None


def server_of(session_id: str) -> str:
    """The server part of a session id (what the bundled client routes by), '' when it has none."""
    head, sep, _ = session_id.partition(ID_SEP)
    return head if sep else ""


def _check_labels(v: dict[str, str]) -> dict[str, str]:
    if len(v) > MAX_LABELS:
        raise ValueError(f"at most {MAX_LABELS} labels, got {len(v)}")
    for k, val in v.items():
        if not _LABEL_KEY.match(k):
            raise ValueError(f"label key {k[:70]!r}: 1-63 characters of letters, digits and _ . - /, "
                             "starting with a letter or digit")
        if len(val) > _LABEL_VALUE_CHARS or "\0" in val:
            raise ValueError(f"label {k!r}: a value of at most {_LABEL_VALUE_CHARS} characters, no NUL")
    return v


class SessionCreate(BaseModel):
    """`POST /v1/sessions`. Limits left out take the server's defaults; a TTL or idle timeout
    above the server's ceiling is a 422 naming the field."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"language": "python", "ttl_s": 600, "idle_timeout_s": 60, "labels": {"trajectory": "step3-g7-s2"}},
    ]})

    language: Literal["python"] = "python"
    runtime: str | None = Field(None, max_length=64, description="python (the standard library) or sci (numpy, "
                                "scipy, sympy, ...); default: the server's --runtime")
    memory_mb: int | None = Field(None, ge=64, le=4096, description="address-space limit of each of the session's "
                                  "processes (default 512)")
    idle_timeout_s: float | None = Field(None, gt=0, allow_inf_nan=False,
                                         description="ended when no execute came for this long (default: the server's)")
    ttl_s: float | None = Field(None, gt=0, allow_inf_nan=False,
                                description="ended this long after it was created, busy or not (default: the server's)")
    cpu_budget_s: float | None = Field(None, gt=0, allow_inf_nan=False,
                                       description="CPU time the session may use in all; past it the session is lost")
    files: dict[str, str] = Field(default_factory=dict, description="path -> base64 content, placed in the "
                                  "session's working directory (and replayed in the program `score` grades)")
    labels: dict[str, str] = Field(default_factory=dict, description="free key/value pairs to find sessions by "
                                   "(`GET /v1/sessions?label=k=v`), e.g. a trajectory or a training step")

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_labels(v)

    @field_validator("files")
    @classmethod
    def _files(cls, v: dict[str, str]) -> dict[str, str]:
        for path, data in v.items():
            try:
                base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"files[{path[:80]!r}] is not valid base64") from None
        return v


class SessionCreated(BaseModel):
    session_id: str = Field(description="'<server id>.<random>': names the server that holds it")
    expires_at: float = Field(description="when its TTL ends (Unix time, seconds)")
    server_id: str = Field(description="the server part of the id")


class SessionInfo(BaseModel):
    """`GET /v1/sessions/{id}`: a session as the server keeps it."""

    session_id: str
    state: Literal["live", "busy", "lost"] = Field(description="lost: its process is gone (every execute answers "
                                                   "session_lost); delete it, or it ends at its idle timeout")
    language: str
    runtime: str
    memory_mb: int
    labels: dict[str, str]
    created_at: float = Field(description="Unix time, seconds")
    expires_at: float = Field(description="Unix time, seconds: the TTL's end")
    idle_timeout_s: float
    idle_expires_at: float = Field(description="Unix time, seconds: when it ends if no execute comes first")
    executes: int
    cpu_s: float = Field(description="CPU time it used so far")
    cpu_budget_s: float
    lost_reason: str = ""


class SessionList(BaseModel):
    sessions: list[SessionInfo]


class SessionDeleted(BaseModel):
    session_id: str
    deleted: bool = Field(description="true when this call ended it; false when it had already ended")
    reason: str = Field("", description="how it had ended (deleted, ttl, idle, shutdown) when `deleted` is false")


class SessionScore(BaseModel):
    """`POST /v1/sessions/{id}/score`: grade what the session built with a code task, exactly as
    `/v1/score` grades a completion (the same reward and `detail`): the program replayed from
    its files and the executes that completed without error runs in a fresh job."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"task": {"type": "code", "tests": {"kind": "assert", "asserts": ["assert add(1, 2) == 3"]}}},
    ]})

    task: CodeTask
    weights: Weights | None = None


def parse_label_selector(values: list[str]) -> dict[str, str]:
    """`label=k=v` query values (`k:v` also taken) as a dict; ValueError naming the bad one."""
    out: dict[str, str] = {}
    for raw in values:
        for part in raw.split(","):
            if not part:
                continue
            k, sep, v = part.partition("=")
            if not sep:
                k, sep, v = part.partition(":")
            if not sep or not k:
                raise ValueError(f"label selector {part[:80]!r}: write key=value")
            out[k] = v
    return out


def b64_files(files: dict[str, str]) -> list[dict[str, Any]]:
    """`{path: base64}` as the sandbox's ExecFile list (validated there)."""
    return [{"path": p, "content_b64": d} for p, d in files.items()]
