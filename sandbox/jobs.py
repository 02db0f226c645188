"""Job and result models: the contract between the server and the sandbox pool.

The runner speaks plain JSON; these models validate what goes in and comes out so that
the server never hands the runner, or reads back, anything malformed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from sandbox.runner import codec

# protocol_error: the candidate broke the runner protocol during that test (scored as a failed test)
TestStatus = Literal["passed", "failed", "error", "timeout", "memory", "output_limit", "skipped", "protocol_error"]

class Limits(BaseModel):
    """Per-test resource limits applied inside the sandbox."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(5.0, gt=0, le=120, description="wall-clock limit per test (and for loading the program)")
    memory_mb: int = Field(512, ge=16, le=16384, description="address-space limit per process")
    nproc: int = Field(16, ge=1, le=1024, description="processes a job may have at once")
    fsize_mb: int = Field(16, ge=0, le=1024, description="largest file a job may write")
    nofile: int = Field(64, ge=16, le=4096, description="open files per process")
    output_bytes: int = Field(16 << 20, ge=1024, le=64 << 20,
                              description="stdout+stderr per test before it is cut (stdio tests compare it as a stream)")

Identifier = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)]

_CANDIDATE_NAMES = ("more names the tests use that are the candidate's functions (calls route to the "
                    "program); needed for a function named like a builtin or a stdlib module")
_HELPERS = "task code the tests use (e.g. a prompt's helper functions), run on the trusted side before the tests"

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

class StdioCase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stdin: str = ""
    stdout: str

class StdioTests(BaseModel):
    """APPS / CodeContests style: run the program on stdin, compare stdout line by line."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["stdio"] = "stdio"
    cases: list[StdioCase] = Field(min_length=1)
    float_tolerance: float | None = Field(None, ge=0, description="compare numeric tokens with this abs/rel tolerance")

class CallCase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None
    unordered: bool | None = Field(None, description="this case's answer is a collection in any order (None: the tests' default)")

    @field_serializer("args", "kwargs", "expected")
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

class Job(BaseModel):
    """One candidate program and the tests that grade it."""

    model_config = ConfigDict(extra="forbid")
    program: str
    language: Literal["python"] = "python"
    tests: Tests
    limits: Limits = Field(default_factory=Limits)

class TestResult(BaseModel):
    __test__ = False  # not a pytest class
    status: TestStatus
    time_s: float = 0.0
    message: str = ""

class JobResult(BaseModel):
    syntax_ok: bool
    runs: bool
    passed: int
    total: int
    tests: list[TestResult]
    load_message: str = ""
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    wall_s: float = 0.0
    runner: str = ""
    flags: list[str] = Field(default_factory=list, description="what the candidate tried (sandbox.runner.flags)")

class ExecFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="relative to the scratch directory")
    content_b64: str

class ExecRequest(BaseModel):
    """Run a program once with stdin and files (SandboxFusion's /run_code semantics)."""

    model_config = ConfigDict(extra="forbid")
    program: str
    language: Literal["python"] = "python"
    stdin: str = ""
    files: list[ExecFile] = Field(default_factory=list)
    fetch_files: list[str] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)

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
