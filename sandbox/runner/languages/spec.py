"""What a language is: the `Language` record (one per entry of table.py) and what the runner asks
of one (its argv, its tools found here, its compile cache key).

A language says how its program is built (a compile argv, or none), how it runs (an argv),
what its runtime needs beyond the job's memory limit (RLIMIT_DATA overhead, an RLIMIT_AS
reservation, threads), and which words on stderr mean it ran out of memory. Adding a language
is a table entry plus its tests. Toolchains are found on this machine's PATH (the runner's
view: the host's /usr under bwrap, the image under Docker), once per process.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
from dataclasses import dataclass, field

from .. import limits

PYTHON = "python"


@dataclass(frozen=True)
class Language:
    """One language: placeholders in argv are {src} (source file name), {main} (entry class),
    {art} (the artifact directory in the cache), {out} (the build's output directory),
    {memory_mb}, {heap_mb}, {pch} (the precompiled-header include flags, or nothing), {pchlib}
    (the archive of what that header declares extern, or nothing), {ld}
    (the faster linker's flag, or nothing), and in `shared` {hart} (the harness's artifact
    directory)."""

    name: str
    aliases: tuple[str, ...]  # what clients send (SandboxFusion's names) and code-fence tags
    source: str  # the source file's name; "{main}.java" where the entry class names it
    run: tuple[str, ...]
    compile: tuple[str, ...] | None = None  # None: the source itself is the artifact
    tools: tuple[str, ...] = ()  # executables that must exist; the first identifies the toolchain
    env: dict[str, str] = field(default_factory=dict)  # {scratch} is the job's scratch
    run_overhead_mb: int = 0  # RLIMIT_DATA = the job's memory + this (the runtime's own, e.g. the JVM's)
    reserve_mb: int = 64  # RLIMIT_AS = RLIMIT_DATA + this (address space reserved, never touched)
    run_nproc: int = 0  # threads the runtime needs (JVM ~20): nproc is at least this
    stack_mb: int = 0  # RLIMIT_STACK for the program (0: the default); Codeforces gives 256 MB
    compile_memory_mb: int = 1024
    compile_reserve_mb: int = 1024
    compile_nproc: int = 64
    oom_markers: tuple[str, ...] = ()  # on stderr of a failed run: it ran out of memory
    entry: str = ""  # a regex whose group 1 names the entry class (Java's public class)
    main: str = "main"
    keep_source: bool = False  # the artifact is the source itself (the build only checks it)
    host_paths: tuple[str, ...] = ()  # directories outside /usr the toolchain reads (a host binds them)
    needs: tuple[str, ...] = ()  # files (not executables) the toolchain needs: TypeScript's compiler
    # one process serving a job's tests (harness.py): its argv ({hart}: the harness's artifact),
    # the harness's file in harness/, and what in a program makes sharing unfaithful or lets it
    # reach the harness (then a process per test)
    shared: tuple[str, ...] = ()
    harness: str = ""
    shared_unsafe: str = ""

    def entry_name(self, program: str) -> str:
        """The entry class the source names (Java: `public class X` -> X), else the default."""
        if self.entry:
            m = re.search(self.entry, program)
            if m:
                return m.group(1)
        return self.main

    def source_name(self, program: str) -> str:
        return self.source.format(main=self.entry_name(program))

    def argv(self, template: tuple[str, ...], **values: str) -> list[str]:
        """An argv from a template: each {name} filled; an element that is only a placeholder
        becomes as many arguments as its value has words (none for an empty one)."""
        out: list[str] = []
        for part in template:
            filled = part.format(**values)
            if re.fullmatch(r"\{\w+\}", part):
                out += filled.split()  # a flags placeholder: none, one or several arguments
            else:
                out.append(filled)
        if out:
            out[0] = resolve(out[0]) or out[0]
        return out


@functools.cache
def resolve(tool: str) -> str | None:
    """A tool's absolute path on the candidates' PATH, or None."""
    if os.path.isabs(tool):
        return tool if os.access(tool, os.X_OK) else None
    return shutil.which(tool, path=limits.CANDIDATE_ENV["PATH"])


_toolchain_ids: dict[str, str] = {}


def toolchain_id(lang: Language) -> str:
    """What identifies the installed toolchain, for the compile cache's key: the real path,
    size and mtime of each tool (a package upgrade changes them; no process is run)."""
    if lang.name not in _toolchain_ids:
        parts = []
        for tool in (*lang.tools, *lang.needs):
            path = resolve(tool) if tool in lang.tools else tool
            if path is None or not os.path.isfile(path):
                return ""
            real = os.path.realpath(path)
            st = os.stat(real)
            parts.append(f"{real}:{st.st_size}:{int(st.st_mtime)}")
        _toolchain_ids[lang.name] = ";".join(parts)
    return _toolchain_ids[lang.name]


def missing_tool(lang: Language) -> str | None:
    """The first tool (or needed file) of `lang` this machine lacks, or None."""
    for tool in lang.tools:
        if resolve(tool) is None:
            return tool
    for path in lang.needs:
        if not os.path.isfile(path):
            return path
    return None


def cache_key(lang: Language, argv: list[str], program: str, extra: bytes = b"") -> str:
    """The compile cache's key: language, toolchain, the compile command (its flags) and the
    source (and, for an exec job, the files the compiler could include)."""
    h = hashlib.sha256()
    for part in (lang.name, toolchain_id(lang), "\0".join(argv), program):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0\1")
    h.update(extra)
    return h.hexdigest()[:40]
