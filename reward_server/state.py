"""The server's one state object, held on `app.state.server`: the settings and metrics from
construction on, the sandbox's JobRunner, the admission bound and the scorer once the lifespan
has started them, and the per-request extras the access log adds. Routes and the gateway read
it through `ServerState.of(request)`; nothing else hangs off `app.state`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from reward_server.admission import Admission
from reward_server.metrics import Metrics
from reward_server.scoring import Scorer
from reward_server.sessions.manager import SessionManager
from reward_server.settings import Settings
from sandbox.api import JobRunner


@dataclass
class ServerState:
    settings: Settings
    metrics: Metrics = field(init=False)  # reads the admission and the runner below at scrape time
    runner: JobRunner | None = None  # set by the lifespan: the sandbox (a pool, or a pool per runtime)
    admission: Admission | None = None
    scorer: Scorer | None = None
    sessions: SessionManager | None = None  # /v1/sessions: ids, TTLs, labels over the runner's sessions
    request_log: dict[str, dict[str, Any]] = field(default_factory=dict)  # request id -> access-log extras

    def __post_init__(self) -> None:
        self.metrics = Metrics(admission=lambda: self.admission, pool=lambda: self.runner)

    @staticmethod
    def of(request: Request) -> ServerState:
        return request.app.state.server
