"""SandboxFusion's `POST /run_code`, `POST /submit` (CommonOJ, `provided_data` stdio form)
and `GET /v1/ping`, with their request/response shapes and semantics.

`/run_jupyter` (cells run in order in one interpreter that keeps state) is not offered: it
answers 501 with what is offered instead (a stateless `/run_code` of the cells joined in order).

`/run_code`: run once with stdin and files; `status` is `Success` when the program finished
with exit code 0, `Failed` when it finished otherwise, failed to compile or ran out of time,
and `SandboxError` when the sandbox itself failed (or the language is not one we run).
A compiled language (cpp, java, go, rust; nodejs's build is `node --check`) fills
`compile_result`; a build that fails is `Failed` with `run_result` null, as SandboxFusion
answers it. Python has no compile step, so `compile_result` is null and a syntax error shows as a run
that finished with exit code 1 and the traceback on stderr, exactly as SandboxFusion does.
verl's `sandbox_fusion` reward path posts one such request per test case and checks
`status`, `run_result.status`, `return_code` and `stdout`; it works unchanged. Over capacity
it answers 504 (verl retries that; a 429 it would score -1); a `run_timeout` above the server
cap runs at the cap and says so in `message`. `files` entries that are null are skipped, as
SandboxFusion does; the others are validated (422 naming `files.<name>`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reward_server.body import parse_body, request_body
from reward_server.errors import BODY_RESPONSES, InvalidRequest, RequestRejected, error, invalid
from reward_server.grading.code import extract_code
from reward_server.logs import request_id
from reward_server.schemas import ScoreItem
from reward_server.scoring import Scorer
from reward_server.settings import Settings
from reward_server.state import ServerState
from sandbox.api import InfraError
from sandbox.jobs import ExecRequest, Limits, escape_surrogates
from sandbox.runner import compare_modes, languages

log = logging.getLogger("reward_server.routes.sandbox_fusion")
router = APIRouter(tags=["compat: SandboxFusion"])

_PYTHON = {"python", "python3"}


class RunCodeRequest(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={"examples": [{"code": "print(input())", "language": "python", "stdin": "hi\n", "run_timeout": 5}]},
    )

    code: str
    language: str = "python"
    compile_timeout: float = Field(10, ge=0, allow_inf_nan=False)
    run_timeout: float = Field(10, ge=0, allow_inf_nan=False)
    memory_limit_MB: int = -1
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict, description="path -> base64 content (null: skipped)")
    fetch_files: list[str] = Field(default_factory=list)
    runtime: str | None = Field(None, max_length=64, description="extension (SandboxFusion clients never send it): "
                                "python or sci (numpy, scipy, ...); default: the server's --runtime")

    @field_validator("code", mode="before")
    @classmethod
    def _code(cls, v: Any) -> Any:
        return escape_surrogates(v)  # model text: a lone surrogate is written as its escape


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


def _language(name: str) -> str | None:
    """Our name for a SandboxFusion language name (python3 -> python, nodejs -> javascript), or None."""
    if name in _PYTHON:
        return "python"
    lang = languages.get(name)
    return lang.name if lang is not None else None


def _unsupported(name: object) -> str:
    return f"language {name!r} is not supported by this sandbox (python, {', '.join(languages.names())})"


def _exec_request(req: RunCodeRequest, settings: Settings, runtime: str) -> tuple[ExecRequest, str]:
    """The sandbox request (or 422 naming the field) and a note on limits that were capped."""
    if len(req.code) > settings.max_code_bytes or len(req.code.encode()) > settings.max_code_bytes:
        raise invalid(["code"], f"longer than {settings.max_code_bytes} bytes", "too_long")
    notes = []
    asked = float(req.run_timeout) or Limits().timeout_s
    timeout = min(asked, settings.max_timeout_s)
    if asked > timeout:
        notes.append(f"run_timeout {asked:g}s is over this server's cap; ran with {timeout:g}s")
    # SandboxFusion's run_timeout is wall-clock and its clients (verl) size their read timeout on
    # it: wall_factor 1 keeps that contract (/v1/score's limits are CPU time, sandbox/runner/cpuclock.py)
    limits: dict[str, Any] = {"timeout_s": timeout, "wall_factor": 1.0,
                              "compile_timeout_s": max(1.0, min(float(req.compile_timeout) or 20.0, 60.0))}
    if req.memory_limit_MB and req.memory_limit_MB > 0:
        limits["memory_mb"] = max(16, min(req.memory_limit_MB, settings.max_memory_mb))
        if req.memory_limit_MB > settings.max_memory_mb:
            notes.append(f"memory_limit_MB {req.memory_limit_MB} is over this server's cap; ran with {settings.max_memory_mb}")
    names = [k for k, v in req.files.items() if v is not None]
    try:
        ereq = ExecRequest(
            program=req.code, language=_language(req.language) or "python", runtime=runtime, stdin=req.stdin or "",
            files=[{"path": k, "content_b64": req.files[k]} for k in names],
            fetch_files=list(req.fetch_files), limits=Limits(**limits),
        )
    except ValidationError as e:
        errs = []
        for err in e.errors():
            loc = list(err["loc"])
            if loc[:1] == ["files"] and len(loc) > 1 and isinstance(loc[1], int):
                loc = ["files", names[loc[1]]]  # our list index -> the caller's key (the path)
            elif loc == []:
                loc = ["files"]
            errs.append(error(loc, err["msg"], err["type"]))
        raise InvalidRequest(errs) from None
    return ereq, "; ".join(notes)


async def _run(scorer: Scorer, ereq: ExecRequest) -> RunCodeResponse:
    try:
        res = await scorer.execute(ereq)
    except InfraError as e:
        return RunCodeResponse(status="SandboxError", message=f"sandbox error: {e}")
    if res.compile is not None:
        scorer.metrics.compile_cache.labels(ereq.language, res.compile.cache).inc()
    elif ereq.language != "python" and not res.syntax_ok:  # not built at all: no toolchain on this host
        return RunCodeResponse(status="SandboxError", message=res.stderr.strip() or f"cannot run {ereq.language} here")
    return exec_to_response(res)


@router.post("/run_code", response_model=RunCodeResponse, summary="SandboxFusion: run code once",
             openapi_extra=request_body(RunCodeRequest),
             responses={**BODY_RESPONSES, 504: {"description": "over capacity (queue full); retry (verl does)"}})
async def run_code(request: Request):
    st = ServerState.of(request)
    settings: Settings = st.settings
    req = await parse_body(request, RunCodeRequest, escape=False)
    language = _language(req.language)
    if language is None:
        return _sandbox_error(_unsupported(req.language))
    runtime = st.scorer.resolve_runtime(req.runtime, ["runtime"], language)
    ereq, note = await asyncio.to_thread(_exec_request, req, settings, runtime)  # base64 checks: off the loop
    out = await _run(st.scorer, ereq)
    if note:
        out.message = f"{out.message}; {note}" if out.message else note
    return _resp(out)


JUPYTER_OFFERED = ("/run_code", "/submit", "/v1/score")
_JUPYTER_NOT_OFFERED = (
    "run_jupyter is not offered: this server keeps no interpreter between calls (every program runs in a fresh "
    "sandboxed process). Run the cells as one program with POST /run_code (the cells joined in order, one "
    "stdout for all), or grade with POST /submit or POST /v1/score."
)


@router.post("/run_jupyter", summary="SandboxFusion: Jupyter cells (not offered: 501)", status_code=501,
             responses={501: {"description": "stateful sessions are not offered; `offered` lists what is"}})
async def run_jupyter() -> JSONResponse:
    """Answered at once, whatever the body: a SandboxFusion client gets a clear refusal, never a 404
    it might read as a wrong URL, nor a 422 about fields that would not help."""
    return JSONResponse(status_code=501, content={"detail": _JUPYTER_NOT_OFFERED, "offered": list(JUPYTER_OFFERED),
                                                  "request_id": request_id.get()})


@router.get("/v1/ping", summary="SandboxFusion: liveness", response_model=str)
async def ping():
    return "pong"


# ---- /submit: SandboxFusion's online-judge API, CommonOJ stdio tests from provided_data


class SubmitConfig(BaseModel):
    model_config = ConfigDict(extra="ignore")
    dataset_type: str | None = None
    language: str | None = "python"
    compile_timeout: float | None = Field(None, ge=0, allow_inf_nan=False)
    run_timeout: float | None = Field(None, ge=0, allow_inf_nan=False)
    provided_data: dict[str, Any] | list[dict[str, Any]] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    runtime: str | None = Field(None, max_length=64, description="extension, as /run_code's: python or sci")
    compare: str | None = Field(None, max_length=40, description="extension: the stdio comparison mode (sandbox.jobs "
                                "StdioTests.compare; default lines; 'sandboxfusion' is SandboxFusion's own)")


class SubmitRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    dataset: str = ""
    id: int | str = 0
    completion: str
    config: SubmitConfig


class EvalTestCase(BaseModel):
    passed: bool
    exec_info: RunCodeResponse
    test_info: dict[str, Any] | None = None


class EvalResult(BaseModel):
    id: int | str
    accepted: bool
    extracted_code: str
    full_code: str | None = None
    test_code: str | None = None
    tests: list[EvalTestCase]
    extracted_type: Literal["fenced", "incomplete_fenced", "heuristic", "empty"] | None = None
    extra: dict[str, Any] | None = None


def _stdio_cases(cfg: SubmitConfig) -> list[dict[str, str]]:
    """CommonOJ's `provided_data.test`: `[{"input": {"stdin": ...}, "output": {"stdout": ...}}]`
    (a list, or its JSON string)."""
    data = cfg.provided_data
    if not isinstance(data, dict) or "test" not in data:
        raise invalid(["config", "provided_data"], "this server evaluates CommonOJ stdio tests given in "
                      "config.provided_data = {\"test\": [{\"input\": {\"stdin\": ...}, \"output\": {\"stdout\": ...}}]}")
    tests = data["test"]
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except ValueError:
            raise invalid(["config", "provided_data", "test"], "not valid JSON") from None
    if not isinstance(tests, list) or not tests:
        raise invalid(["config", "provided_data", "test"], "must be a non-empty list of {input, output}")
    cases = []
    for i, t in enumerate(tests):
        ok = isinstance(t, dict) and isinstance(t.get("input"), dict) and isinstance(t.get("output"), dict)
        stdin = t["input"].get("stdin", "") if ok else None
        stdout = t["output"].get("stdout") if ok else None
        if not isinstance(stdin, str) or not isinstance(stdout, str):
            raise invalid(["config", "provided_data", "test", i], "needs input.stdin and output.stdout strings")
        cases.append({"stdin": stdin, "stdout": stdout})
    return cases


def _extracted_type(mode: str, completion: str) -> str:
    if mode == "raw":
        return "heuristic" if completion.strip() else "empty"
    return "fenced"


@router.post("/submit", response_model=EvalResult, summary="SandboxFusion: judge one completion (CommonOJ stdio)",
             openapi_extra=request_body(SubmitRequest), responses=BODY_RESPONSES)
async def submit(request: Request):
    st = ServerState.of(request)
    settings: Settings = st.settings
    req = await parse_body(request, SubmitRequest)
    cfg = req.config
    language = _language(cfg.language or "python")
    if language is None:
        raise invalid(["config", "language"], _unsupported(cfg.language))
    task: dict[str, Any] = {"type": "code", "language": language,
                            "tests": {"kind": "stdio", "cases": _stdio_cases(cfg)}}
    if cfg.compare is not None:
        if cfg.compare not in compare_modes.MODES:
            raise invalid(["config", "compare"], f"unknown comparison mode {cfg.compare!r} (known: "
                          f"{', '.join(compare_modes.MODES)})")
        task["tests"]["compare"] = cfg.compare
    if cfg.runtime is not None:
        task["runtime"] = st.scorer.resolve_runtime(cfg.runtime, ["config", "runtime"], language)
    st.scorer.check_raw_tasks([(["config", "provided_data", "test"], task)])
    if cfg.run_timeout:
        task["timeout_s"] = min(float(cfg.run_timeout), settings.max_timeout_s)
    try:
        item = ScoreItem.model_validate({"id": req.id, "completion": req.completion, "task": task})
    except ValidationError as e:
        raise InvalidRequest([error(["config", "provided_data", *err["loc"]], err["msg"], err["type"]) for err in e.errors()]) from None
    program, mode = await asyncio.to_thread(extract_code, req.completion, None, language)
    (res,) = await st.scorer.score([item], field="completion")
    if res.status != "ok":
        raise RequestRejected(503, f"sandbox error: {res.error}", retry_after=1)
    tests = []
    for case, t in zip(item.task.tests.cases, res.code.tests if res.code else [], strict=False):
        ok = t.status == "passed"
        run = CommandRunResult(status="TimeLimitExceeded" if t.status == "timeout" else "Finished",
                               execution_time=t.time_s, return_code=0 if ok else None, stdout=None,
                               stderr=t.message or None)
        info = RunCodeResponse(status="Success" if ok else "Failed", message=t.message, run_result=run)
        tests.append(EvalTestCase(passed=ok, exec_info=info, test_info={"input": {"stdin": case.stdin},
                                                                        "output": {"stdout": case.stdout}}))
    body = EvalResult(id=req.id, accepted=bool(tests) and all(t.passed for t in tests), extracted_code=program,
                      tests=tests, extracted_type=_extracted_type(mode, req.completion),
                      extra={"reward": res.reward, "flags": res.flags})
    return _resp(body)
