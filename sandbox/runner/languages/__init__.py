"""Languages as data: one `Language` (spec.py) per entry of table.py, and what the runner asks of
them.

A language says how its program is built (a compile argv, or none), how it runs (an argv),
what its runtime needs beyond the job's memory limit (RLIMIT_DATA overhead, an RLIMIT_AS
reservation, threads), and which words on stderr mean it ran out of memory. Adding a language
is a table entry plus its tests. Toolchains are found on this machine's PATH (the runner's
view: the host's /usr under bwrap, the image under Docker), once per process.

A face only: the record and its helpers are spec.py's, the table and the lookups over it
table.py's; the modules here import those, never this package.
"""

from .spec import PYTHON, Language, cache_key, missing_tool, resolve, toolchain_id
from .table import available, get, host_paths, names, runnable

__all__ = ["PYTHON", "Language", "available", "cache_key", "get", "host_paths", "missing_tool", "names", "resolve",
           "runnable", "toolchain_id"]
