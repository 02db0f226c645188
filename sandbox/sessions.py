"""Session models: the contract between the server and the sandbox for stateful sessions.

A session is one sandboxed interpreter kept alive between calls (a job's isolation: its own
leased uid, scratch with quotas, seccomp, Landlock, limits), in a session slot of its own on a
runner, so idle sessions never hold job slots. Each execute runs code in the interpreter's
persistent globals; nothing the session's process says is trusted for grading: the sandbox
keeps the code of the executes that completed without error, and `session_program` gives it
back as one program that the server grades in a fresh, ordinary job.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sandbox.jobs import MAX_FILES, ExecFile, Runtime, check_files, escape_surrogates, has_surrogates

MAX_CODE_CHARS = 1 << 20  # one execute's code
MAX_SESSION_FILES_BYTES = 8 << 20  # the files a session starts with, decoded (they are replayed in its program)

SessionStatus = Literal["ok", "error", "timeout", "session_lost"]


class SessionSpec(BaseModel):
    """What a session is opened with (the server adds TTL, idle timeout and labels on its side)."""

    model_config = ConfigDict(extra="forbid")
    language: Literal["python"] = "python"
    runtime: Runtime = "python"
    memory_mb: int = Field(512, ge=64, le=4096, description="address-space limit of each of the session's processes")
    files: list[ExecFile] = Field(default_factory=list, max_length=MAX_FILES,
                                  description="placed in the session's scratch directory (its working directory)")
    cpu_budget_s: float = Field(600.0, gt=0, le=7200,
                                description="CPU time the session's interpreter may use in all; past it the session is lost")
    nproc: int = Field(16, ge=1, le=64, description="processes the session may have at once (its interpreter's "
                       "threads included)")

    @model_validator(mode="after")
    def _files(self) -> SessionSpec:
        check_files(self.files, MAX_SESSION_FILES_BYTES)
        return self


class SessionExec(BaseModel):
    """One execute: code run in the session's globals."""

    model_config = ConfigDict(extra="forbid")
    code: str = Field(max_length=MAX_CODE_CHARS)
    timeout_s: float = Field(10.0, gt=0, le=300,
                             description="the call's limit on wall-clock time and on CPU time alike; past it the "
                                         "code is interrupted (KeyboardInterrupt)")
    stdin: str = Field("", max_length=MAX_CODE_CHARS, description="what sys.stdin reads during this call")

    @field_validator("code", mode="before")
    @classmethod
    def _code(cls, v: Any) -> Any:
        return escape_surrogates(v)

    @field_validator("stdin")
    @classmethod
    def _stdin(cls, v: str) -> str:
        if has_surrogates(v):
            raise ValueError("stdin is not valid Unicode (lone surrogate)")
        return v


class SessionErrorInfo(BaseModel):
    """The exception an execute ended with, as the session's interpreter described it (the
    session's own word: shown to its client, never used for grading)."""

    type: str
    message: str
    traceback: str  # the code's frames only, none of the runner's

    @model_validator(mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return escape_surrogates(v)


class SessionExecResult(BaseModel):
    """What one execute gave. status: ok; error (the code raised: `error` says what); timeout (the
    call passed its limit and was interrupted: the session lives on); session_lost (the
    session's process is gone: killed after an interrupt that did not land, a memory or CPU-budget
    limit, a crash, or its runner died; every later execute answers session_lost too)."""

    status: SessionStatus
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    result: str | None = Field(None, description="repr of the code's trailing expression, as a notebook shows it")
    error: SessionErrorInfo | None = None
    time_s: float = Field(0.0, description="wall-clock time of the call in the sandbox")
    cpu_s: float = Field(0.0, description="CPU time the call used (the interpreter and the children it waited for)")
    cpu_total_s: float = Field(0.0, description="CPU time the session used so far, of its cpu_budget_s")
    message: str = Field("", description="why the session was lost, or what limit a call hit")

    @model_validator(mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return escape_surrogates(v)


class SessionStats(BaseModel):
    """A sandbox's session figures (every pool's added up)."""

    capacity: int = Field(description="sessions it holds at once (separate from the job slots)")
    live: int
    opened_total: int
    closed_total: int
    lost_total: int
    executes_total: int


def replay_program(files: list[ExecFile], cells: list[str]) -> str:
    """The program a session's history amounts to: its files written into the working directory
    (as the session found them), then each execute that completed without error, in order."""
    head = []
    if files:
        listing = [(f.path, f.content_b64) for f in files]
        head.append("def _session_files(listing):\n"
                    "    import base64, os\n"
                    "    for path, data in listing:\n"
                    "        if os.path.dirname(path):\n"
                    "            os.makedirs(os.path.dirname(path), exist_ok=True)\n"
                    "        with open(path, 'wb') as f:\n"
                    "            f.write(base64.b64decode(data))\n"
                    f"_session_files({listing!r})\n"
                    "del _session_files\n")
    return "\n".join([*head, *(c if c.endswith("\n") else c + "\n" for c in cells)])
