"""Math answer equivalence: extraction, a safe LaTeX/plain-text parser, SymPy comparison,
all run in killable worker processes.

    grader = MathGrader(workers=2)
    await grader.start()
    g = await grader.grade(completion, "\\frac{1}{2}")   # MathGrade(reward=1.0, status="ok", ...)
    await grader.close()

    grade_sync(completion, answer)   # blocking, any thread (TRL / verl adapters)

See docs/MATH.md for the tolerance, percent and unit policies and the status values.

Rooms: `grade` runs extract -> normalize -> parse (lexer; values, arith, sets) -> compare (numeric)
and builds the verdict; `worker` runs it in a child process, `pool` drives the workers; `options` holds
`MathOptions` and `MathGrade`, the only option and result models.
"""

from .options import MathGrade, MathOptions, Status
from .pool import MathGrader, WorkerPool, grade_sync

__all__ = ["MathGrade", "MathGrader", "MathOptions", "Status", "WorkerPool", "grade_sync"]
