"""Job and result models: the contract between the server and the sandbox pool.

The runner speaks plain JSON; these models validate what goes in and comes out so that
the server never hands the runner, or reads back, anything malformed.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from sandbox.runner import codec, compare_modes, flags, languages

# protocol_error: the candidate broke the runner protocol during that test (scored as a failed test)
# compile_error: the program in a compiled language did not build (every test gets it)
TestStatus = Literal["passed", "failed", "error", "timeout", "memory", "output_limit", "skipped", "protocol_error",
                     "compile_error"]


def _language(name: str) -> str:
    """A language's canonical name (sandbox.runner.languages: aliases such as "nodejs" or
    "c++" included); ValueError naming the ones we know."""
    if name == languages.PYTHON:
        return name
    lang = languages.get(name)
    if lang is None:
        raise ValueError(f"unknown language {name!r}; known: python, {', '.join(languages.names())}")
    return lang.name


Language = Annotated[str, Field(max_length=40, description="python, or a name in sandbox.runner.languages"),
                     AfterValidator(_language)]


def escape_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (dict keys included) written as a
    backslash escape: a runner (or a client) can hand back text that is not valid Unicode,
    and one such string must not make a whole response unserialisable."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, list | tuple):
        return [escape_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {escape_surrogates(k): escape_surrogates(v) for k, v in value.items()}
    return value


def has_surrogates(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class Limits(BaseModel):
    """Per-test resource limits applied inside the sandbox."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(5.0, gt=0, le=120, description="CPU-time limit per test (and for loading the program): "
                             "user+system of the candidate's processes, as competitive judges count it")
    wall_factor: float = Field(3.0, ge=1, le=20, description="wall-clock backstop per test, in multiples of timeout_s "
                               "(for a program that sleeps or blocks)")
    stop_on_timeout: bool = Field(True, description="after a test times out, skip the rest (each scored as failed): "
                                  "a looping program costs one timeout, not one per test")
    memory_mb: int = Field(512, ge=16, le=16384, description="address-space limit per process")
    nproc: int = Field(16, ge=1, le=1024, description="processes a job may have at once")
    fsize_mb: int = Field(16, ge=0, le=1024, description="largest file a job may write")
    nofile: int = Field(64, ge=16, le=4096, description="open files per process")
    output_bytes: int = Field(16 << 20, ge=1024, le=64 << 20,
                              description="stdout+stderr per test before it is cut (stdio tests compare it as a stream)")
    compile_timeout_s: float = Field(20.0, gt=0, le=60, description="CPU-time limit for building the program (its wall clock: this + 2 s; a compile idle for 4 s is cut)")

Identifier = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)]

_CANDIDATE_NAMES = ("more names the tests use that are the candidate's functions (calls route to the "
                    "program); needed for a function named like a builtin or a stdlib module")
_HELPERS = "task code the tests use (e.g. a prompt's helper functions), run on the trusted side before the tests"
_IN_PLACE = ("the candidate's functions change their arguments in place and the tests read those arguments after "
             "the call (a sort-in-place task): changes to list, dict and set arguments, positional or keyword, are "
             "copied into the test's objects. Default false: the candidate works on copies, and every read of an "
             "argument after the call sees what the test passed in")

class AssertCheckTests(BaseModel):
    """HumanEval style: `test` defines `check(candidate)`, called with `entry_point`.

    The test's free names resolve on the trusted side: only `entry_point` and
    `candidate_names` reach the program; builtins, stdlib modules and the helpers (from
    `helpers`, or a HumanEval `prompt`'s definitions other than the entry point) are the
    task's own; any other free name is a NameError in the tests that use it."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["assert"] = "assert"
    test: str
    entry_point: str
    split_asserts: bool = Field(True, description="count each top-level assert of a flat check() as one test")
    candidate_names: list[Identifier] = Field(default_factory=list, max_length=100, description=_CANDIDATE_NAMES)
    helpers: str = Field("", description=_HELPERS)
    prompt: str = Field("", description="a HumanEval prompt: its definitions other than the entry point are helpers")
    in_place: bool = Field(False, description=_IN_PLACE)

class AssertListTests(BaseModel):
    """MBPP style: a list of assert statements, one test each; `setup` runs before each.

    Free names that are not builtins, stdlib modules or helpers are the candidate's; a
    function named like a builtin or a stdlib module (MBPP/126's `sum`) must be listed in
    `candidate_names`, else the tests get the builtin."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["assert"] = "assert"
    asserts: list[str] = Field(min_length=1)
    setup: str = ""
    candidate_names: list[Identifier] = Field(default_factory=list, max_length=100, description=_CANDIDATE_NAMES)
    helpers: str = Field("", description=_HELPERS)
    in_place: bool = Field(False, description=_IN_PLACE)

_COMPARE = ("how stdout is compared with the expected output: a named mode reproducing a data set's own "
            "tester (" + ", ".join(compare_modes.MODES) + "; see docs/JUDGING.md); ignored where a checker is given")


def _known_compare(name: str) -> str:
    if name not in compare_modes.MODES:
        raise ValueError(f"unknown comparison mode {name!r} (known: {', '.join(compare_modes.MODES)})")
    return name


CompareMode = Annotated[str, AfterValidator(_known_compare)]

class StdioCase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stdin: str = ""
    stdout: str
    compare: CompareMode | None = Field(None, max_length=40, description="this case's comparison mode (None: the tests' own)")

class TaskProgram(BaseModel):
    """A program that is part of the task, not the candidate: a checker (special judge) or an
    interactor, in any language the server runs; testlib's protocol (docs/JUDGING.md)."""

    model_config = ConfigDict(extra="forbid")
    language: Language = "cpp"
    source: str = Field(min_length=1, max_length=1 << 20)

class StdioTests(BaseModel):
    """APPS / CodeContests style: run the program on stdin, compare stdout (by `compare`, or by a
    `checker`); with an `interactor`, the program talks to it instead of reading the input."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["stdio"] = "stdio"
    cases: list[StdioCase] = Field(min_length=1)
    float_tolerance: float | None = Field(None, ge=0, description="abs/rel tolerance for an expected token written as a decimal or with an exponent; "
                                            "an expected integer needs its exact value")
    compare: CompareMode = Field("lines", max_length=40, description=_COMPARE)
    checker: TaskProgram | None = Field(None, description="a special judge: `checker <input> <output> <answer>`, "
                                        "exit 0 OK, 1 WA, 2 PE, 3 FAIL, 7 partial points (testlib)")
    interactor: TaskProgram | None = Field(None, description="an interactive problem's judge: `interactor <input> "
                                           "<output>`, its stdout is the program's stdin and the reverse")

class CallCase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None
    also_expected: list[Any] = Field(default_factory=list, max_length=8, description=(
        "other answers that also pass this case, compared by the same rules (e.g. verl/TACO's "
        "one-element list output [x], which verl's prime_code also accepts as x)"))
    unordered: bool | None = Field(None, description="this case's answer is a collection in any order (None: the tests' default)")

    @field_serializer("args", "kwargs", "expected", "also_expected")
    def _frame_safe(self, value: Any) -> Any:
        """Ints past 4300 digits go to the runner in hexadecimal (a JSON frame cannot hold them)."""
        return codec.to_json(value)

class CallTests(BaseModel):
    """Call `fn_name` (or `Solution().fn_name`) with JSON args; compare to `expected`,
    exactly by type (sandbox.runner.codec.values_equal): ints exact, floats within
    `float_tolerance`, bool is not a number, a set or any reordering matches an expected
    list only where `unordered` says order does not matter."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["call"] = "call"
    fn_name: str
    cases: list[CallCase] = Field(min_length=1)
    float_tolerance: float | None = Field(1e-9, ge=0)
    unordered: bool = Field(False, description="every case's answer is a collection in any order (the top level only)")

Tests = AssertCheckTests | AssertListTests | StdioTests | CallTests

def _known_runtime(name: str) -> str:
    from sandbox import runtimes

    return runtimes.get(name).name  # ValueError (a 422 naming the field) for an unknown one


Runtime = Annotated[str, AfterValidator(_known_runtime),
                    Field(description="which packages the program may import (sandbox.runtimes: python, sci)")]

class Job(BaseModel):
    """One candidate program and the tests that grade it."""

    model_config = ConfigDict(extra="forbid")
    program: str
    language: Language = "python"
    runtime: Runtime = "python"
    tests: Tests
    limits: Limits = Field(default_factory=Limits)
    testlib_h: str | None = Field(None, repr=False, description="the operator's testlib.h, sent where the task's "
                                  "checker or interactor includes it (reward_server.grading.testlib)")

    @model_validator(mode="after")
    def _stdio_for_others(self) -> Job:
        if self.language != languages.PYTHON and self.tests.kind != "stdio":
            raise ValueError(f"a {self.language} program takes stdio tests only (tests.kind 'stdio')")
        return self

class TestResult(BaseModel):
    __test__ = False  # not a pytest class
    status: TestStatus
    time_s: float = 0.0
    message: str = ""
    score: float | None = Field(None, ge=0, le=1, description="a failed test's partial credit (a checker's points), "
                                "counted as that fraction of a passed test; absent for all-or-nothing tests")

    @model_serializer(mode="wrap")
    def _shape(self, handler: SerializerFunctionWrapHandler):  # no return type: the schema stays the model's
        """`score` only where a checker gave partial credit (every other test's shape unchanged)."""
        d = handler(self)
        if self.score is None:
            d.pop("score", None)
        return d

    @field_validator("message", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return escape_surrogates(v)

class CompileInfo(BaseModel):
    """How a program in a compiled language was built (sandbox.runner.compiled.Build)."""

    ok: bool
    cache: Literal["hit", "miss", "merged", "none"] = "miss"
    status: str = "finished"
    return_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    time_s: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return escape_surrogates(v)


class RunOutcome(BaseModel):
    """What the runner says about a job's tests: the part of a code result that every layer
    above carries as it is (`JobResult` adds the job's raw output, the server's `CodeDetail`
    how the program was cut out of the completion)."""

    syntax_ok: bool
    runs: bool
    passed: int
    total: int
    tests: list[TestResult]
    load_message: str = ""
    wall_s: float = 0.0
    runner: str = ""
    flags: list[str] = Field(default_factory=list, description="what the candidate tried (sandbox.runner.flags)")
    compile: CompileInfo | None = None

    @model_validator(mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return escape_surrogates(v)


class JobResult(RunOutcome):
    """A `run` job's result as the pool hands it to the server."""

    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False


# Caps on what /run_code-style requests may place in or take from the scratch directory.
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255  # one path component, as the kernel counts it
MAX_FILES = 256
MAX_FILES_BYTES = 32 << 20  # decoded, all files together
MAX_FETCH_FILES = 32


def scratch_path(path: str) -> str:
    """The normal form of a path inside the scratch directory, or ValueError saying why it is
    not one (absolute, escaping, empty, NUL, not valid Unicode, over-long)."""
    if not isinstance(path, str):
        raise ValueError("a path must be a string")
    if has_surrogates(path):
        raise ValueError("path is not valid Unicode (lone surrogate)")
    if "\0" in path:
        raise ValueError("path contains a NUL character")
    if len(path) > MAX_PATH_CHARS:
        raise ValueError(f"path longer than {MAX_PATH_CHARS} characters")
    if path.startswith("/"):
        raise ValueError("path must be relative to the scratch directory")
    norm = posixpath.normpath(path)
    if norm in ("", ".") or norm == ".." or norm.startswith("../"):
        raise ValueError("path must name a file inside the scratch directory")
    for part in norm.split("/"):
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise ValueError(f"a path component is longer than {MAX_NAME_BYTES} bytes")
    return norm


class ExecFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="relative to the scratch directory; stored in normal form")
    content_b64: str

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return scratch_path(v)

    @field_validator("content_b64")
    @classmethod
    def _b64(cls, v: str) -> str:
        try:
            base64.b64decode(v.encode("ascii"), validate=True)
        except (UnicodeEncodeError, binascii.Error, ValueError):
            raise ValueError("content_b64 is not valid base64") from None
        return v

    @property
    def size(self) -> int:
        """Decoded size in bytes, from the encoded length (no decode)."""
        n = len(self.content_b64)
        return n // 4 * 3 - self.content_b64[-2:].count("=") if n else 0

class ExecRequest(BaseModel):
    """Run a program once with stdin and files (SandboxFusion's /run_code semantics)."""

    model_config = ConfigDict(extra="forbid")
    program: str
    language: Language = "python"
    runtime: Runtime = "python"
    stdin: str = ""
    files: list[ExecFile] = Field(default_factory=list, max_length=MAX_FILES)
    fetch_files: list[Annotated[str, AfterValidator(scratch_path)]] = Field(default_factory=list, max_length=MAX_FETCH_FILES)
    limits: Limits = Field(default_factory=Limits)

    @field_validator("program", mode="before")
    @classmethod
    def _program(cls, v: Any) -> Any:
        return escape_surrogates(v)  # model text: escaped like a string literal, never a crash

    @field_validator("stdin")
    @classmethod
    def _stdin(cls, v: str) -> str:
        if has_surrogates(v):
            raise ValueError("stdin is not valid Unicode (lone surrogate)")
        return v

    @field_validator("fetch_files")
    @classmethod
    def _fetch(cls, v: list[str]) -> list[str]:
        """Each normal form once: aliases of one file (`d/../f`, `./f`) are read once."""
        return list(dict.fromkeys(v))

    @model_validator(mode="after")
    def _tree(self) -> ExecRequest:
        check_files(self.files)
        return self


def check_files(files: list[ExecFile], max_bytes: int = MAX_FILES_BYTES) -> None:
    """ValueError where `files` cannot be one scratch tree: a path twice, a path that is both a
    file and a directory, more than `max_bytes` decoded in all."""
    seen: set[str] = set()
    dirs: set[str] = set()
    total = 0
    for f in files:
        if f.path in seen:
            raise ValueError(f"files: {f.path!r} is given twice (after normalising the path)")
        seen.add(f.path)
        parts = f.path.split("/")
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
        total += f.size
    clash = sorted(seen & dirs)
    if clash:
        raise ValueError(f"files: {clash[0]!r} is both a file and a directory")
    if total > max_bytes:
        raise ValueError(f"files: {total} bytes in all, at most {max_bytes}")

class ExecResult(BaseModel):
    status: Literal["finished", "error", "timeout", "memory", "output_limit"]
    syntax_ok: bool
    return_code: int | None
    stdout: str
    stderr: str
    time_s: float
    output_truncated: bool = False
    files: dict[str, str] = Field(default_factory=dict, description="fetched files, base64")
    runner: str = ""
    flags: list[str] = Field(default_factory=list, description="what the candidate tried (sandbox.runner.flags)")
    compile: CompileInfo | None = None

    @model_validator(mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return escape_surrogates(v)


# The runner's wire format: these functions are the only code on the server side that knows
# its message and answer keys (sandbox.runner reads the one and writes the other).

def run_message(job: Job, stream: bool = False) -> dict[str, Any]:
    """The runner's `run` message for a job; `stream`: the runner reports each test as it ends."""
    msg: dict[str, Any] = {"op": "run", "program": job.program, "tests": job.tests.model_dump(),
                           "limits": job.limits.model_dump(), "stream": stream}
    if job.language != languages.PYTHON:
        msg["language"] = job.language
    if job.testlib_h is not None:
        msg["testlib_h"] = job.testlib_h
    return msg


def exec_message(req: ExecRequest) -> dict[str, Any]:
    """The runner's `exec` message for one execution."""
    msg: dict[str, Any] = {"op": "exec", "program": req.program, "stdin": req.stdin,
                           "files": [f.model_dump() for f in req.files], "fetch_files": list(req.fetch_files),
                           "limits": req.limits.model_dump()}
    if req.language != languages.PYTHON:
        msg["language"] = req.language
    return msg


def _compile_info(answer: dict[str, Any]) -> CompileInfo | None:
    """The runner's word on the build of a compiled-language job (absent for python)."""
    c = answer.get("compile")
    return CompileInfo(**c) if isinstance(c, dict) else None


def refusal(answer: dict[str, Any]) -> str | None:
    """Why the runner refused a `run` job's tests (they do not compile or plan on its verdict
    side), or None: a refused job has no result (the pool raises TaskError)."""
    return str(answer["error"]) if "error" in answer else None


def job_result(answer: dict[str, Any], runner: str) -> JobResult:
    """The result of a `run` job from the runner's final answer (one it did not refuse);
    `runner` names the runner that answered."""
    return JobResult(
        syntax_ok=bool(answer["syntax_ok"]), runs=bool(answer["runs"]),
        passed=int(answer["passed"]), total=int(answer["total"]),
        tests=[TestResult(**t) for t in answer["tests"]],
        load_message=str(answer.get("message", "")), stdout=answer.get("stdout", ""),
        stderr=answer.get("stderr", ""), output_truncated=bool(answer.get("output_truncated")),
        wall_s=float(answer.get("wall_s", 0.0)), runner=runner, flags=flags.clean(answer.get("flags")),
        compile=_compile_info(answer),
    )


def exec_result(answer: dict[str, Any], runner: str) -> ExecResult:
    """The result of an `exec` job from the runner's final answer."""
    return ExecResult(
        status=answer["status"], syntax_ok=bool(answer["syntax_ok"]), return_code=answer.get("return_code"),
        stdout=answer.get("exec_stdout", ""), stderr=answer.get("exec_stderr", ""),
        time_s=float(answer.get("time_s", 0.0)), output_truncated=bool(answer.get("output_truncated")),
        files=answer.get("files", {}), runner=runner, flags=flags.clean(answer.get("flags")),
        compile=_compile_info(answer),
    )
