"""Server settings, from flags (see `cli.py`) and the environment (`REWARD_SERVER_*`).

Every cap the server enforces lives here so that an operator can size it from the
outside: `REWARD_SERVER_MAX_QUEUED_JOBS=10000 reward-server serve`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sandbox import runtimes as sandbox_runtimes
from sandbox.hosts import HostKind


class Weights(BaseModel):
    """Reward shaping for code: `syntax*syntax_ok + runtime*runs + tests*passed/total`, minus
    `flag_penalty` when the runner flagged a reward-hack attempt. Finite numbers only: an
    infinite weight would make every reward null or infinite."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    syntax: float = Field(0.1, ge=0, le=1e6, description="weight of `syntax_ok` (the program compiles)")
    runtime: float = Field(0.1, ge=0, le=1e6, description="weight of `runs` (its top level executes cleanly)")
    tests: float = Field(0.8, ge=0, le=1e6, description="weight of the passed fraction of tests")
    flag_penalty: float = Field(
        0.0, ge=0, le=1e6,
        description="subtracted from a code item's reward when `detail.flags` is not empty (what the "
        "candidate tried, see docs/SERVER.md); 0 leaves rewards exactly what the verdicts give",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="REWARD_SERVER_", env_nested_delimiter="__", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)

    sandbox: HostKind = Field("auto", description="sandbox host: docker when an engine answers, else bwrap")
    pool_size: int | None = Field(None, ge=1, description="runners in the pool (default: the host's choice)")
    pool_slots: int | None = Field(
        None, ge=1, description="jobs the pool runs at once (default: min(4 x cores, memory / job_memory_mb); limits "
        "are CPU time, so sleeping or waiting jobs cost nothing; docs/RELIABILITY.md)",
    )
    job_memory_mb: int = Field(256, ge=16, description="memory one job is budgeted when sizing the pool by default")
    wall_factor: float = Field(3.0, ge=1, le=20, description="default wall-clock backstop per test, in multiples of "
                               "its CPU-time limit (a task's `wall_factor` overrides it; /run_code uses 1)")
    runtime: str = Field(
        sandbox_runtimes.DEFAULT, description="runtime of the code tasks that do not name one: python (the standard "
        "library) or sci (numpy, scipy, sympy, pandas, networkx...; sandbox/runtimes); it must be built on this host",
    )
    runtimes: Annotated[tuple[str, ...] | None, NoDecode] = Field(
        None, description="runtimes a request may name, comma-separated (default: the default one plus every runtime "
        "built on this host); one not built is listed unavailable on /readyz and refused with a 422",
    )
    lazy_runtimes: bool = Field(
        True, description="start a non-default runtime's pool on its first job (its first request waits ~2-3 s) "
        "instead of at start-up; false starts every offered pool at start-up (each pool is as many runners as the "
        "default one: ~2-3 s to start, ~30 MB idle, ~150 MB with every connection warm; docs/RUNTIMES.md)",
    )
    eager_toolchains: bool = Field(
        False, description="bwrap, languages \"auto\" (the default): start the pool whose runners see the toolchains "
        "at start-up instead of on the first job in another language than Python (that job then waits ~1-3 s, and "
        "~7 s more once per machine while C++'s precompiled header is built; docs/LANGUAGES.md)",
    )
    sandbox_options: dict[str, object] = Field(
        default_factory=dict, description="extra host options for make_pool; `languages`: \"auto\" (default: on bwrap "
        "Python jobs run in the interpreter's view, the others in a toolchain pool's), true (one view with the "
        "toolchains for every job), false (Python only)")
    pin_cpus: bool | None = Field(
        None,
        description="keep each job's processes on a CPU of its own while jobs <= CPUs (docs/SANDBOX.md); "
        "default: on for docker and bwrap, off for socketdir",
    )

    max_items_per_request: int = Field(4096, ge=1)
    max_body_bytes: int = Field(64 << 20, ge=1024)
    max_code_bytes: int = Field(256 << 10, ge=64, description="largest completion per item")
    max_tests_per_item: int = Field(
        4096, ge=1, description="test cases or asserts per task; checked on the raw body, before validation"
    )
    max_timeout_s: float = Field(30.0, gt=0, le=120, description="ceiling for a task's per-test timeout_s")
    max_memory_mb: int = Field(4096, ge=16, le=16384, description="ceiling for a task's memory_mb")
    testlib_header: Path | None = Field(
        None, description="testlib.h (from github.com/MikeMirzayanov/testlib) for checkers and interactors that "
        "include it; without it such a task is a task_error naming the cause (docs/JUDGING.md)",
    )
    time_scale: float = Field(
        1.0, gt=0, le=100, description="multiplies a task's own timeout_s (a data set row's time limit arrives as one) "
        "for this host: a limit set on the judge's machine, scaled to this one; the result is capped at max_timeout_s; "
        "verdicts stay in CPU time (docs/JUDGING.md)",
    )

    max_inflight_jobs: int | None = Field(
        None, ge=1, description="jobs handed to the pool at once (default: the pool's capacity)"
    )
    max_queued_jobs: int = Field(4096, ge=0, description="accepted jobs waiting for a slot; beyond: 429")
    retry_after_s: float = Field(1.0, gt=0, description="smallest Retry-After on a 429")
    shutdown_grace_s: float = Field(60.0, ge=0, description="how long shutdown waits for accepted work")

    # stateful sessions (/v1/sessions, docs/SESSIONS.md): held apart from the job slots
    max_sessions: int | None = Field(
        None, ge=0, description="sessions held at once (default: what the sandbox holds, its pools' max_sessions, "
        "sandbox_options.max_sessions); beyond: 429 with Retry-After")
    session_ttl_s: float = Field(3600.0, gt=0, le=7 * 86400, description="a session's lifetime from its creation, "
                                 "busy or not: the default and the most a request may ask (ttl_s)")
    session_idle_timeout_s: float = Field(300.0, gt=0, le=86400, description="a session with no execute for this "
                                          "long is ended: the default and the most a request may ask")
    session_cpu_budget_s: float = Field(600.0, gt=0, le=7200, description="CPU time a session may use in all: "
                                        "the default and the most a request may ask")
    session_server_id: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_-]{1,32}$", description="the first part of this server's session ids, by which "
        "the bundled client routes a session to its server (default: random at each start, so an id from an "
        "earlier run is never taken for a new session)")
    session_sweep_s: float = Field(0.5, gt=0, le=60, description="how often expired sessions are looked for")

    auth_token: SecretStr | None = Field(None, description="when set, every route but the health checks needs it")

    default_weights: Weights = Field(default_factory=Weights)

    @field_validator("runtime")
    @classmethod
    def _known_runtime(cls, v: str) -> str:
        return sandbox_runtimes.get(v).name

    @field_validator("runtimes", mode="before")
    @classmethod
    def _runtime_list(cls, v: Any) -> Any:
        """`python,sci` (a flag, the environment) or a list; each a known runtime."""
        if isinstance(v, str):
            v = [n.strip() for n in v.split(",") if n.strip()]
        if isinstance(v, (list, tuple)):
            for n in v:
                sandbox_runtimes.get(n)
        return v

    @field_validator("testlib_header")
    @classmethod
    def _readable_header(cls, v: Path | None) -> Path | None:
        """A header that cannot be read refuses the start, not every checker's item later."""
        if v is None:
            return v
        try:
            with open(v, "rb") as f:  # a directory or an unreadable file fails here
                f.read(1)
        except OSError as exc:
            raise ValueError(f"testlib_header: {exc}") from None
        return v

    @field_validator("auth_token")
    @classmethod
    def _token_not_blank(cls, v: SecretStr | None) -> SecretStr | None:
        """An empty token must not quietly mean "no auth": refuse to start instead."""
        if v is not None and not v.get_secret_value().strip():
            raise ValueError("auth_token is empty; unset it (no auth) or set a real token")
        return v

    log_level: str = "info"
    log_json: bool = True

    math_workers: int = Field(2, ge=1)
