"""Public option and result models of the math grader: the one place the options and their defaults are
written. The server validates a request's options into `MathOptions` once; the worker validates the
dict it receives once more (the process boundary), and nothing else reads options from a dict."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "no_answer", "parse_error", "too_large", "timeout", "worker_error"]


class MathOptions(BaseModel):
    """How a math answer is extracted and compared. Every field has a safe default."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(
        2.0, gt=0, le=60,
        description="Hard wall-clock limit per check. The worker is killed and replaced past it.",
    )
    memory_mb: int = Field(
        512, ge=128, le=16384,
        description="Address-space cap (RLIMIT_AS) of the worker process while it checks.",
    )
    fallback: Literal["last_number", "none"] = Field(
        "last_number",
        description="When a completion has no \\boxed{}, no 'final answer' phrase and is not a bare "
        "answer: take the last number in the text ('last_number') or report no answer ('none').",
    )
    rel_tol: float = Field(
        1e-6, ge=0, le=0.1,
        description="Relative tolerance used when either side is written as a decimal (an approximation). "
        "Exact values (integers, fractions, radicals, pi, ...) on both sides are compared exactly.",
    )
    percent: Literal["flexible", "strict"] = Field(
        "flexible",
        description="'flexible': 'X%' equals X/100 and also the bare X (a missing % sign is forgiven). "
        "'strict': 'X%' only equals X/100.",
    )
    units: Literal["strip", "strict"] = Field(
        "strip",
        description="'strip': unit words after a number (\\text{cm}, 'square units', 'weeks', km/h, degrees "
        "outside trig) are ignored; in a completion a known two-letter unit glued to a number (10cm, 5kg) is "
        "a unit too (single letters like 10m stay variables); a reference's '10cm' is 10*c*m, or 10 cm against "
        "an answer that gives a unit as well. "
        "'strict': the dropped unit words of both sides must be the same.",
    )
    list_order: Literal["reference", "unordered", "ordered"] = Field(
        "reference",
        description="Order of a bare list in the reference (tuples '( )'/'[ ]' are always ordered, '\\{ \\}' "
        "sets always unordered). 'reference': a plain comma list of values ('10, 4, -2') is ordered; "
        "it is unordered when the reference marks it as a set of answers: 'and'/'or'/';' between items, "
        "several boxes, +-, assignments ('x = 1, 2', 'a_1 = 2, a_2 = 5'), a list of tuples, or a box "
        "introduced by 'x =' / 'the solutions are'; or when the completion marks its own list so: 'the roots/"
        "solutions/zeros are', 'in increasing order', items joined by 'or', one unknown given several values. "
        "'unordered': every bare list is a set. 'ordered': every bare list is ordered.",
    )
    interval_form: Literal["required", "union", "either"] = Field(
        "union",
        description="An answer written as inequalities when the reference is an interval or set. 'union' "
        "(default): accepted when the reference's set is not a single interval (a union of pieces, "
        "excluded points: '|x| > 2' = '(-oo,-2) U (2,oo)', 'x != 3' = 'R \\ {3}'); against a single "
        "interval ('[-2, 7]') a chain or one-sided inequality is wrong, as the question asked for interval "
        "notation. 'required': always wrong (Math-Verify's policy). 'either': always accepted when the sets "
        "are equal. An inequality reference accepts an equivalent interval in every mode.",
    )
    exact_confirm: bool = Field(
        True,
        description="When both sides are exact constants that agree to 30 digits, confirm at a precision "
        "scaled to the integers written in them (up to 5000 digits), so 2^(2^-1000) != 1.",
    )
    rounded_reference: Literal["exact", "precision"] = Field(
        "exact",
        description="'precision': a reference decimal with at least 3 significant digits (3.14, 12.57, "
        "0.3333) is taken as a rounding: an exact, non-terminating answer (pi, 4pi, 1/3) that rounds to it "
        "at the reference's own number of decimal places is accepted. Decimal answers and exact answers "
        "that terminate (integers, 157/50) still use rel_tol. 'exact' (default; 'precision' adds a false "
        "positive on the public set: 33.3 vs 100/3): rel_tol only.",
    )
    strip_think: bool = Field(
        True,
        description="Grade only the text after the last </think>; an unclosed <think> means no answer.",
    )
    max_answer_chars: int = Field(
        2000, ge=16, le=100_000,
        description="Extracted answers longer than this are refused (status too_large).",
    )
    max_completion_chars: int = Field(
        200_000, ge=100, le=2_000_000,
        description="Completions longer than this are cut to their last max_completion_chars characters.",
    )


class MathGrade(BaseModel):
    """The verdict on one completion."""

    reward: float = Field(description="1.0 when the final answer is equivalent to the reference, else 0.0.")
    status: Status = Field(
        description="ok: both answers parsed and were compared (reward says the verdict); "
        "no_answer: no final answer found in the completion (or the reference is empty); "
        "parse_error: an answer could not be parsed and its text did not match; "
        "too_large: an answer broke a size guard (length, exponent, factorial, nesting); "
        "timeout: the check ran past timeout_s and its worker was killed; "
        "worker_error: the worker died (e.g. memory cap) or failed unexpectedly.",
    )
    extracted: str | None = Field(None, description="The final answer text taken from the completion.")
    parsed_pred: str | None = Field(None, description="str() of the parsed form of the completion's answer.")
    parsed_ref: str | None = Field(None, description="str() of the parsed form of the reference.")
    reason: str = Field("", description="Short reason for the verdict, e.g. 'numeric equal', 'sets differ'.")
    time_s: float = Field(0.0, description="Wall-clock seconds the check took, queueing excluded.")

    @classmethod
    def failed(cls, status: Status, reason: str, time_s: float = 0.0) -> MathGrade:
        """A verdict for a check that did not run to its end (timeout, dead worker): reward 0, nothing
        extracted. Every other verdict is built by `grade.grade`."""
        return cls(reward=0.0, status=status, reason=reason, time_s=time_s)
