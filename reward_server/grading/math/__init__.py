"""Math answer equivalence: extraction, a safe LaTeX/plain-text parser, SymPy comparison,
all run in killable worker processes.

    grader = MathGrader(workers=2)
    await grader.start()
    g = await grader.grade(completion, "\\frac{1}{2}")   # MathGrade(reward=1.0, status="ok", ...)
    await grader.close()

    grade_sync(completion, answer)   # blocking, any thread (TRL / verl adapters)

See docs/MATH.md for the tolerance, percent and unit policies and the status values.
"""

from .options import MathGrade, MathOptions, Status
from .pool import MathGrader, WorkerPool, grade_sync

__all__ = ["MathGrade", "MathGrader", "MathOptions", "Status", "WorkerPool", "grade_sync"]
