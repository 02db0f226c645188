"""SandboxFusion's `POST /run_code`, with its request/response shapes and semantics.

Run once with stdin and files; `status` is `Success` when the program finished with exit
code 0, `Failed` when it finished otherwise, failed to compile or ran out of time, and
`SandboxError` when the sandbox itself failed (or the language is not one we run, or its
toolchain is not installed here).
Python has no compile step, so `compile_result` is null and a syntax error shows as a run
that finished with exit code 1 and the traceback on stderr, exactly as SandboxFusion does.
A compiled language (cpp, java, go, rust; nodejs has no build) fills `compile_result`; a build
that fails is `Failed` with `run_result` null, as SandboxFusion answers it.
verl's `sandbox_fusion` reward path posts one such request per test case and checks
`status`, `run_result.status`, `return_code` and `stdout`; it works unchanged.
"""

from __future__ import annotations

import logging
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from sandbox.jobs import ExecFile, ExecRequest, Limits
from sandbox.runner import languages

log = logging.getLogger("reward_server.compat.sandbox_fusion")
router = APIRouter(tags=["compat: SandboxFusion"])

_PYTHON = {"python", "python3"}


class RunCodeRequest(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={"examples": [{"code": "print(input())", "language": "python", "stdin": "hi\n", "run_timeout": 5}]},
    )

    code: str
    language: str = "python"
    compile_timeout: float = Field(10, ge=0)
    run_timeout: float = Field(10, ge=0)
    memory_limit_MB: int = -1
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict, description="path -> base64 content")
    fetch_files: list[str] = Field(default_factory=list)


class CommandRunResult(BaseModel):
    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


def _resp(r: RunCodeResponse) -> Response:
    return Response(r.model_dump_json(), media_type="application/json")


def _sandbox_error(message: str) -> Response:
    return _resp(RunCodeResponse(status="SandboxError", message=message))


def compile_to_result(c) -> CommandRunResult:
    """The runner's build (sandbox.jobs.CompileInfo) as SandboxFusion's compile_result."""
    if c.status == "timeout":
        return CommandRunResult(status="TimeLimitExceeded", execution_time=c.time_s, return_code=None,
                                stdout=c.stdout, stderr=c.stderr)
    rc = c.return_code if c.return_code is not None else (0 if c.ok else -9)
    return CommandRunResult(status="Finished", execution_time=c.time_s, return_code=rc, stdout=c.stdout,
                            stderr=c.stderr)


def exec_to_response(res) -> RunCodeResponse:
    if res.compile is not None and not res.compile.ok:  # SandboxFusion: Failed, compile_result set, no run
        return RunCodeResponse(status="Failed", message="compile error", compile_result=compile_to_result(res.compile),
                               run_result=None, executor_pod_name=res.runner or None)
    if res.status == "timeout":
        run = CommandRunResult(status="TimeLimitExceeded", execution_time=res.time_s, return_code=None,
                               stdout=res.stdout, stderr=res.stderr)
    else:
        rc, stderr = res.return_code, res.stderr
        if not res.syntax_ok:  # as CPython reports it: exit code 1, SyntaxError on stderr
            rc = 1 if rc in (None, 0) else rc
            if "SyntaxError" not in (stderr or ""):
                stderr = (stderr or "") + "SyntaxError: the program does not compile\n"
        elif rc is None:  # killed for memory/output with no exit status: report a signal-style code
            rc = -9
        run = CommandRunResult(status="Finished", execution_time=res.time_s, return_code=rc,
                               stdout=res.stdout, stderr=stderr)
    ok = run.status == "Finished" and run.return_code == 0
    return RunCodeResponse(
        status="Success" if ok else "Failed",
        message="" if ok else ({"timeout": "time limit exceeded", "memory": "memory limit exceeded",
                                "output_limit": "output limit exceeded"}.get(res.status, "")),
        compile_result=compile_to_result(res.compile) if res.compile is not None else None,
        run_result=run,
        executor_pod_name=res.runner or None,
        files=dict(res.files),
    )


@router.post("/run_code", response_model=RunCodeResponse, summary="SandboxFusion: run code once")
async def run_code(req: RunCodeRequest, request: Request):
    st = request.app.state
    settings = st.settings
    language = "python" if req.language in _PYTHON else req.language
    if language != "python" and languages.get(language) is None:
        return _sandbox_error(f"language {req.language!r} is not supported by this sandbox "
                              f"(python, {', '.join(languages.names())})")
    if len(req.code.encode()) > settings.max_code_bytes:
        from reward_server.app import item_error  # noqa: PLC0415

        raise item_error(["code"], f"longer than {settings.max_code_bytes} bytes", "too_long")
    timeout = min(float(req.run_timeout) or Limits().timeout_s, settings.max_timeout_s)
    limits = {"timeout_s": timeout,
              "compile_timeout_s": max(1.0, min(float(req.compile_timeout) or 10.0, settings.max_timeout_s, 60.0))}
    if req.memory_limit_MB and req.memory_limit_MB > 0:
        limits["memory_mb"] = max(16, min(req.memory_limit_MB, settings.max_memory_mb))
    try:
        ereq = ExecRequest(
            program=req.code,
            language=language,
            stdin=req.stdin or "",
            files=[ExecFile(path=k, content_b64=v or "") for k, v in req.files.items()],
            fetch_files=list(req.fetch_files),
            limits=Limits(**limits),
        )
    except Exception as e:
        return _sandbox_error(f"invalid request: {e}")
    st.admit(1)
    adm = st.admission
    scorer = st.scorer
    try:
        async with adm.slot():
            res = await st.pool.execute(ereq)
    except scorer.infra_error as e:
        return _sandbox_error(f"sandbox error: {e}")
    finally:
        adm.release(1)
    if res.compile is not None:
        scorer.metrics.compile_cache.labels(ereq.language, res.compile.cache).inc()
    elif ereq.language != "python" and not res.syntax_ok:  # not built at all: no toolchain here
        return _sandbox_error(res.stderr.strip() or f"cannot run {req.language!r} here")
    return _resp(exec_to_response(res))
