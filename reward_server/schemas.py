"""Request and response models of the HTTP API (`POST /v1/score`).

The test kinds are exactly the sandbox's models (`sandbox.jobs`), so a task that validates
here is a job the runner accepts. A callable discriminator picks the test model from
`kind` (and, for `assert`, from `test` vs `asserts`), so a malformed task gets one precise
error naming its field instead of four union branches.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    Tag,
    model_serializer,
    model_validator,
)

from reward_server.settings import Weights
from sandbox.jobs import (
    AssertCheckTests,
    AssertListTests,
    CallTests,
    Language,
    RunOutcome,
    StdioTests,
    TestResult,
    escape_surrogates,
)

log = logging.getLogger("reward_server.schemas")

__all__ = [
    "CodeDetail",
    "CodeTask",
    "ExtractOptions",
    "MathTask",
    "ScoreItem",
    "ScoreRequest",
    "ScoreResponse",
    "ScoreResult",
    "Task",
    "TestsSpec",
    "Weights",
]


def _tests_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        kind = value.get("kind")
        has_asserts = "asserts" in value
    else:
        kind = getattr(value, "kind", None)
        has_asserts = isinstance(value, AssertListTests)
    if kind == "assert":
        return "assert_list" if has_asserts else "assert_check"
    if kind in ("stdio", "call"):
        return kind
    return None


TestsSpec = Annotated[
    Annotated[AssertCheckTests, Tag("assert_check")]
    | Annotated[AssertListTests, Tag("assert_list")]
    | Annotated[StdioTests, Tag("stdio")]
    | Annotated[CallTests, Tag("call")],
    Discriminator(
        _tests_tag,
        custom_error_type="invalid_tests_kind",
        custom_error_message="tests.kind must be 'assert' (with 'test'+'entry_point' or 'asserts'), 'stdio' or 'call'",
    ),
]


class CodeTask(BaseModel):
    """Grade a program by running its tests in the sandbox."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["code"] = "code"
    language: Language = Field("python", description="python, cpp, java, go, rust, javascript (or a name "
                               "SandboxFusion clients send: nodejs, c++ ...); other than python: stdio tests")
    runtime: str | None = Field(
        None, max_length=64, description="the packages the program may import: python (the standard library) or sci "
        "(numpy, scipy, sympy, pandas, networkx...); default: the server's (--runtime); /readyz lists those offered",
    )
    tests: TestsSpec
    timeout_s: float | None = Field(None, gt=0, description="per-test CPU-time limit (server default 5 s); the wall "
                                    "clock is a backstop at `wall_factor` times it")
    stop_on_timeout: bool | None = Field(None, description="skip the tests after one that timed out, each scored as "
                                         "failed (default true: a looping program costs one timeout, not one per test)")
    wall_factor: float | None = Field(None, ge=1, le=20, description="wall-clock backstop per test in multiples of "
                                      "timeout_s, for a program that sleeps or blocks (server default 3)")
    memory_mb: int | None = Field(None, ge=16, description="per-process memory limit (server default 512 MiB)")
    prefix: str = Field("", description="prepended to the extracted program (e.g. a HumanEval prompt)")

    @model_validator(mode="after")
    def _stdio_for_others(self) -> CodeTask:
        if self.language != "python" and self.tests.kind != "stdio":
            raise ValueError(f"language {self.language!r} takes stdio tests only (tests.kind 'stdio')")
        return self


class MathTask(BaseModel):
    """Grade a final answer against a reference. Extra fields are the math grader's options."""

    model_config = ConfigDict(extra="allow")

    type: Literal["math"]
    answer: str = Field(description="the reference answer, LaTeX or plain")
    # the grader's options as admission validated them (Scorer.check_limits), so the server
    # validates them once; the worker validates what crosses to it once more
    _options: Any = PrivateAttr(None)


def _task_tag(value: Any) -> str | None:
    t = value.get("type", "code") if isinstance(value, dict) else getattr(value, "type", None)
    return t if t in ("code", "math") else None


Task = Annotated[
    Annotated[CodeTask, Tag("code")] | Annotated[MathTask, Tag("math")],
    Discriminator(
        _task_tag,
        custom_error_type="invalid_task_type",
        custom_error_message="task.type must be 'code' or 'math'",
    ),
]


class ExtractOptions(BaseModel):
    """How the program is cut out of a completion."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["auto", "last_python_fence", "last_fence", "first_fence", "raw"] = Field(
        "auto",
        description="auto: the last ```python fence, else the first fence of any language, else the raw text",
    )
    strip_think: bool = Field(True, description="drop everything up to the last </think> first")


class ScoreItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | int | None = None
    completion: str
    task: Task = Field(description="a code or math task; on /v1/score also a data set's own row, "
                       "`{\"type\": \"dataset\", \"format\", \"row\", \"language\"?}`, made a code task by "
                       "the server (docs/JUDGING.md, data set rows as tasks)")


class ScoreRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "items": [
                        {
                            "id": "he0-s0",
                            "completion": "```python\ndef add(a, b):\n    return a + b\n```",
                            "task": {
                                "type": "code",
                                "language": "python",
                                "tests": {"kind": "assert", "asserts": ["assert add(1, 2) == 3"]},
                            },
                        },
                        {
                            "id": "io-s1",
                            "completion": "```python\nprint(sum(map(int, input().split())))\n```",
                            "task": {
                                "type": "code",
                                "tests": {"kind": "stdio", "cases": [{"stdin": "1 2\n", "stdout": "3\n"}]},
                                "timeout_s": 2,
                            },
                        },
                        {"id": "m0", "completion": "so the answer is \\boxed{\\frac{1}{2}}", "task": {"type": "math", "answer": "0.5"}},
                    ],
                    "weights": {"syntax": 0.1, "runtime": 0.1, "tests": 0.8},
                }
            ]
        },
    )

    items: list[ScoreItem]
    weights: Weights | None = None
    extract: ExtractOptions | None = None
    queue_timeout_s: float | None = Field(None, gt=0, le=86400, description=(
        "a code item still waiting for a sandbox slot after this many seconds is answered "
        "`queue_timeout` (reward null) instead of running: for a caller with a deadline"))


class CodeDetail(RunOutcome):
    """A code item's `detail`: the runner's word on the job (tests, flags, the build) and how the
    program was cut out of the completion. The server writes it, the client reads it back."""

    kind: Literal["code"] = "code"
    extract_mode: str = Field(description="how the program was cut out of the completion (ExtractOptions.mode)")
    code_chars: int = Field(description="the extracted program's length")
    queue_s: float = Field(0.0, description="seconds the job waited for a sandbox slot before it ran (wall_s is "
                           "the run itself)")

    @classmethod
    def of(cls, result: RunOutcome, extract_mode: str, code_chars: int, queue_s: float = 0.0) -> CodeDetail:
        """The detail of a job the runner ran (times to the microsecond)."""
        tests = [TestResult.model_construct(status=t.status, time_s=round(t.time_s, 6), message=t.message, score=t.score)
                 for t in result.tests]
        return cls(syntax_ok=result.syntax_ok, runs=result.runs, passed=result.passed, total=result.total, tests=tests,
                   load_message=result.load_message, extract_mode=extract_mode, code_chars=code_chars,
                   wall_s=round(result.wall_s, 6), runner=result.runner, flags=list(result.flags),
                   compile=result.compile, queue_s=round(queue_s, 6))

    @classmethod
    def no_code(cls, total: int, extract_mode: str) -> CodeDetail:
        """The detail of a completion with no program in it: nothing ran, every test skipped."""
        skipped = TestResult(status="skipped", message="no code")
        return cls(syntax_ok=False, runs=False, passed=0, total=total, tests=[skipped] * total,
                   load_message="no code found in the completion", extract_mode=extract_mode, code_chars=0)

    @model_serializer(mode="wrap")
    def _shape(self, handler: SerializerFunctionWrapHandler):  # no return type: the schema stays the model's
        """`kind` first, `compile` only for a program that was built (a Python job has none)."""
        d = handler(self)
        if self.compile is None:
            d.pop("compile", None)
        return {"kind": d.pop("kind"), **d}


class ScoreResult(BaseModel):
    """One item's outcome. `reward` is null exactly when `status` is not `ok`: `infra_error`
    (the sandbox failed; worth retrying), `task_error` (the task's tests cannot run; not) or
    `queue_timeout` (the job waited for a slot past the request's `queue_timeout_s` and never ran).
    `detail` is a `CodeDetail` for a graded code item; otherwise (a math item, an error) the
    grader's or the error's fields."""

    id: str | int | None = None
    reward: float | None
    status: Literal["ok", "infra_error", "task_error", "queue_timeout"]
    detail: CodeDetail | dict[str, Any] = Field(default_factory=dict, union_mode="left_to_right")

    @model_validator(mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        """Every string serialisable: a lone surrogate (from a runner, a grader, a client) is escaped."""
        return escape_surrogates(v) if isinstance(v, dict) else v

    @property
    def ok(self) -> bool:
        """Graded: a reward to use (not an infra or task error)."""
        return self.status == "ok" and self.reward is not None

    @property
    def code(self) -> CodeDetail | None:
        """The code detail of a graded code item, else None."""
        return self.detail if isinstance(self.detail, CodeDetail) else None

    @property
    def flags(self) -> list[str]:
        """What the candidate tried (sandbox.runner.flags); empty for anything but a code item."""
        return list(self.detail.flags) if isinstance(self.detail, CodeDetail) else []

    @property
    def error(self) -> str:
        """Why an item has no reward (infra_error, task_error), else empty."""
        return str(self.detail.get("error", "")) if isinstance(self.detail, dict) else ""


class ScoreResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "results": [
                        {
                            "id": "he0-s0",
                            "reward": 1.0,
                            "status": "ok",
                            "detail": {
                                "kind": "code",
                                "syntax_ok": True,
                                "runs": True,
                                "passed": 1,
                                "total": 1,
                                "tests": [{"status": "passed", "time_s": 0.001, "message": ""}],
                                "load_message": "",
                                "extract_mode": "last_python_fence",
                                "code_chars": 34,
                                "wall_s": 0.01,
                                "runner": "bwrap-0-pid4711",
                                "flags": [],
                            },
                        }
                    ]
                }
            ]
        }
    )

    results: list[ScoreResult]


def encode_results(results: list[ScoreResult]) -> bytes:
    """`{"results": [...]}` as JSON, one item at a time: an item that cannot be written (a bug)
    becomes that item's infra_error, never a failed batch."""
    parts: list[bytes] = []
    for r in results:
        try:
            parts.append(r.model_dump_json().encode())
        except Exception as e:  # noqa: BLE001  (any serialiser failure is the same bug)
            log.error("result of item %r not serialisable: %s", r.id, type(e).__name__)
            parts.append(ScoreResult(id=r.id, reward=None, status="infra_error",
                                     detail={"error": "internal: result not serialisable"}).model_dump_json().encode())
    return b'{"results":[' + b",".join(parts) + b"]}"
