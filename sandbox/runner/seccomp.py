"""The candidate's last locks: a seccomp filter, a Landlock scope and an empty bounding set.

A candidate runs as a uid of its own with no capabilities; what it may still ask the kernel
for is what this module narrows, to at least what Docker's default profile refuses an
unprivileged container (the usual start of a kernel privilege escalation) plus what would
let one job reach another:

- seccomp (hand-assembled classic BPF, installed with prctl through ctypes: the runner is
  stdlib-only, so no libseccomp): no new namespaces (unshare, setns, clone with a CLONE_NEW*
  flag; clone3 answers ENOSYS so libc falls back to clone, whose flags we can read), no
  mount API, keyrings, bpf, perf_event_open, ptrace or process_vm_*, kexec or modules,
  io_uring (it would open sockets past this filter), clock or host-name changes, System V
  IPC and POSIX message queues (shared by every job of a runner, and they outlive a job); and
  sockets only of AF_UNIX or NETLINK_ROUTE (no loopback TCP/UDP between jobs, no packet or
  other netlink families such as nf_tables). Refused calls fail with an errno, never kill.
  Checked call by call against moby's profiles/seccomp/default.json (v0.2.3) for an amd64
  container with no capabilities: every call it refuses is refused here too (the six numbers
  x86_64 never implemented answer ENOSYS from the kernel itself), and a few it allows are not:
  ptrace and process_vm_* (one job reading another's memory), modify_ldt (16-bit segments: no
  runtime here uses it, a long line of kernel bugs) and memfd_secret (memory taken out of the
  kernel's direct map: it fragments that map for every process on the machine). Docker's list
  is an allowlist, so a call newer than it is refused; ours does the same with a ceiling: every
  number from `X86_64_FIRST_UNREVIEWED` on answers ENOSYS (libc then falls back, as for clone3)
  until someone reviews it and moves the ceiling.
- Landlock (a domain per candidate, entered right after the spawner forks it): with scopes
  (ABI 6+) a candidate may neither connect to an abstract unix socket nor signal a process
  outside its own domain, so the abstract-socket namespace and kill(-1) stop at the job; and
  it may open files for writing only beneath its scratch base, /dev and its cgroup, so it
  cannot lower the OOM score the spawner's child gave it (+1000: a job out of memory loses
  its own processes, never the spawner). Skipped where the kernel has no Landlock.
- The bounding set is emptied in the spawner (`drop_bounding_set`, before any candidate is
  forked), so no candidate can ever regain a capability, whatever it executes.

The filter is installed once per connection, in the spawner (`enter`, before it forks any
candidate): a filter is inherited across fork and can never be removed, so candidates pay
only its run on each of their system calls (a few dozen BPF instructions, JITed), not its
compilation; the spawner needs none of what it refuses. The Landlock ruleset is built once
there too (`make_ruleset`); a candidate pays one landlock_restrict_self (`restrict`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Callable

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
CAP_LAST_CAP_FILE = "/proc/sys/kernel/cap_last_cap"

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

# classic BPF opcodes
_LD_W_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000

# struct seccomp_data: nr (0), arch (4), ip (8), args[6] (16 + 8*i, low word first)
_NR, _ARCH = 0, 4


def _arg(i: int) -> int:
    return 16 + 8 * i


CLONE_NEW_ANY = (
    0x00000080  # CLONE_NEWTIME
    | 0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
AF_UNIX, AF_NETLINK, NETLINK_ROUTE = 1, 16, 0
PERSONALITY_OK = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)  # what Docker's profile allows

# x86_64 numbers (asm/unistd_64.h) of the calls refused outright with EPERM
X86_64_REFUSED = {
    "ptrace": 101, "syslog": 103, "uselib": 134, "ustat": 136, "sysfs": 139, "vhangup": 153,
    "pivot_root": 155, "_sysctl": 156, "chroot": 161, "acct": 163, "settimeofday": 164,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173, "create_module": 174,
    "init_module": 175, "delete_module": 176, "get_kernel_syms": 177, "query_module": 178,
    "quotactl": 179, "nfsservctl": 180, "lookup_dcookie": 212, "clock_settime": 227,
    "mbind": 237, "set_mempolicy": 238, "get_mempolicy": 239, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "migrate_pages": 256, "unshare": 272, "move_pages": 279,
    "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320,
    "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_getfd": 438, "mount_setattr": 442,
    "quotactl_fd": 443, "set_mempolicy_home_node": 450, "process_madvise": 440,
    # System V IPC and POSIX message queues: objects in the runner's IPC namespace that every
    # job could open (a channel between jobs) and that outlive the job that made them
    "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66, "shmdt": 67,
    "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semtimedop": 220, "mq_open": 240,
    "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245,
    # allowed by Docker on amd64, refused here (see the module's docstring)
    "modify_ldt": 154, "memfd_secret": 447,
    # refused by Docker's profile (not on its list): LSM attributes, the mount API's open_tree
    # with attributes, the inode-attribute calls of 6.17, the uprobe trampoline's call
    "uprobe": 336, "lsm_get_self_attr": 459, "lsm_set_self_attr": 460, "lsm_list_modules": 461,
    "open_tree_attr": 467, "file_getattr": 468, "file_setattr": 469,
}
# every call from this number on is newer than the review above (x86_64 ends at 469 in Linux
# 6.18): ENOSYS, as if the kernel were older, until it is reviewed
X86_64_FIRST_UNREVIEWED = 470
X86_64_CLONE, X86_64_CLONE3, X86_64_SOCKET, X86_64_PERSONALITY = 56, 435, 41, 135

# Landlock (include/uapi/linux/landlock.h)
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, LANDLOCK_SCOPE_SIGNAL = 1, 2
LANDLOCK_ACCESS_FS_WRITE_FILE = 1 << 1
LANDLOCK_RULE_PATH_BENEATH = 1


class _Asm:
    """A few-instruction assembler: jumps name labels, resolved to relative offsets."""

    def __init__(self) -> None:
        self.ins: list[tuple[int, object, object, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.ins)

    def op(self, code: int, k: int = 0, jt: object = 0, jf: object = 0) -> None:
        self.ins.append((code, jt, jf, k))

    def assemble(self) -> bytes:
        out = bytearray()
        for i, (code, jt, jf, k) in enumerate(self.ins):
            rel = [self.labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
            if not all(0 <= r <= 255 for r in rel):
                raise ValueError(f"jump out of range at {i}")
            out += struct.pack("=HBBI", code, rel[0], rel[1], k)
        return bytes(out)


def build_x86_64() -> bytes:
    """The filter program (struct sock_filter[]) for x86_64."""
    a = _Asm()
    a.op(_LD_W_ABS, _ARCH)
    a.op(_JEQ, AUDIT_ARCH_X86_64, "native", 0)
    a.op(_RET, RET_KILL_PROCESS)  # another ABI (i386 int 0x80): its numbers differ
    a.label("native")
    a.op(_LD_W_ABS, _NR)
    a.op(_JGE, X32_SYSCALL_BIT, "eperm", 0)  # the x32 ABI reuses these calls under other numbers
    a.op(_JGE, X86_64_FIRST_UNREVIEWED, "enosys", 0)
    for nr in sorted(X86_64_REFUSED.values()):
        a.op(_JEQ, nr, "eperm", 0)
    a.op(_JEQ, X86_64_CLONE3, "enosys", 0)
    a.op(_JEQ, X86_64_CLONE, "clone", 0)
    a.op(_JEQ, X86_64_SOCKET, "socket", 0)
    a.op(_JEQ, X86_64_PERSONALITY, "personality", 0)
    a.op(_RET, RET_ALLOW)
    a.label("clone")
    a.op(_LD_W_ABS, _arg(0))  # flags
    a.op(_JSET, CLONE_NEW_ANY, "eperm", 0)
    a.op(_RET, RET_ALLOW)
    a.label("socket")
    a.op(_LD_W_ABS, _arg(0))  # domain
    a.op(_JEQ, AF_UNIX, "allow", 0)
    a.op(_JEQ, AF_NETLINK, 0, "eafnosupport")
    a.op(_LD_W_ABS, _arg(2))  # protocol
    a.op(_JEQ, NETLINK_ROUTE, "allow", "eafnosupport")
    a.label("personality")
    a.op(_LD_W_ABS, _arg(0))
    for value in PERSONALITY_OK:
        a.op(_JEQ, value, "allow", 0)
    a.label("eperm")
    a.op(_RET, RET_ERRNO | errno.EPERM)
    a.label("enosys")
    a.op(_RET, RET_ERRNO | errno.ENOSYS)
    a.label("eafnosupport")
    a.op(_RET, RET_ERRNO | errno.EAFNOSUPPORT)
    a.label("allow")
    a.op(_RET, RET_ALLOW)
    return a.assemble()


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _Prepared:
    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.prctl = self.libc.prctl
        self.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4  # kernel words, not C ints
        self.prctl.restype = ctypes.c_int
        self.syscall = self.libc.syscall
        self.syscall.argtypes = [ctypes.c_long] * 5  # number and four words: always pass all
        self.syscall.restype = ctypes.c_long
        self.prog_bytes = ctypes.create_string_buffer(build_x86_64()) if _is_x86_64() else None
        self.fprog = None
        if self.prog_bytes is not None:
            n = (len(self.prog_bytes) - 1) // 8  # create_string_buffer adds a NUL
            self.fprog = _Fprog(n, ctypes.cast(self.prog_bytes, ctypes.c_void_p))
        self.landlock_abi = self.syscall(SYS_LANDLOCK_CREATE_RULESET, 0, 0, LANDLOCK_CREATE_RULESET_VERSION, 0)
        self.ruleset_fd = -1


def _is_x86_64() -> bool:
    return platform.machine() in ("x86_64", "AMD64")


_prepared: _Prepared | None = None


def prepare() -> None:
    """Build the filter and look up libc once (in the spawner, before it forks candidates)."""
    global _prepared
    if _prepared is None:
        _prepared = _Prepared()


def status() -> dict:
    """What `enter` will install here (for logs and tests)."""
    prepare()
    p = _prepared
    return {"seccomp": p.fprog is not None, "landlock_abi": max(p.landlock_abi, 0),
            "landlock_scopes": p.landlock_abi >= 6, "landlock_ruleset": p.ruleset_fd >= 0}


def drop_bounding_set() -> bool:
    """Empty this process's capability bounding set (needs CAP_SETPCAP; the effective and
    permitted sets are unchanged). False where we may not (then candidates still lose every
    capability when they drop their uid, and no_new_privs stops setuid binaries)."""
    prepare()
    try:
        with open(CAP_LAST_CAP_FILE) as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    ok = True
    for cap in range(last + 1):
        if _prepared.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            ok = False
    return ok


class JailError(OSError):
    """A lock could not be installed: the candidate must not run."""


def enter() -> None:
    """Lock this process (the spawner) and every process it will fork for good:
    no_new_privs, then the seccomp filter. Raises JailError if it could not be set."""
    prepare()
    p = _prepared
    if p.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise JailError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if p.fprog is not None and p.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(p.fprog), 0, 0) != 0:
        raise JailError(ctypes.get_errno(), "PR_SET_SECCOMP")


def make_ruleset(writable: list[str]) -> None:
    """Build, once in the spawner, the Landlock ruleset each candidate restricts itself to:
    the scopes (no abstract unix socket, no signal beyond the candidate's own processes) and
    files opened for writing only beneath `writable` (its scratch base, /dev, its cgroup):
    nothing else a job could write through a path, /proc/self/oom_score_adj included, which
    the spawner's child sets before it locks itself (`restrict`). Where the kernel has no
    Landlock this does nothing (the scopes need ABI 6, Linux 6.12)."""
    prepare()
    p = _prepared
    if p.landlock_abi < 1 or p.ruleset_fd >= 0:
        return
    scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL if p.landlock_abi >= 6 else 0
    # struct landlock_ruleset_attr {u64 handled_access_fs, handled_access_net, scoped}
    attr = ctypes.create_string_buffer(struct.pack("=QQQ", LANDLOCK_ACCESS_FS_WRITE_FILE, 0, scoped), 24)
    fd = p.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.addressof(attr), 24, 0, 0)
    if fd < 0:
        raise JailError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        add_path_rules(p.syscall, fd, LANDLOCK_ACCESS_FS_WRITE_FILE, writable)
    except JailError:
        os.close(fd)
        raise
    os.set_inheritable(fd, False)  # forked children keep it (fork copies fds); exec'd ones do not
    p.ruleset_fd = fd


def add_path_rules(syscall: Callable[..., int], fd: int, access: int, paths: list[str]) -> None:
    """Allow `access` beneath each path that exists in the Landlock ruleset `fd` (the one rule
    loop of the candidates' write ruleset and the compilers' read view, compileview.py)."""
    for path in paths:
        try:
            parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            # struct landlock_path_beneath_attr {u64 allowed_access; s32 parent_fd} (packed)
            rule = ctypes.create_string_buffer(struct.pack("=Qi", access, parent), 12)
            if syscall(SYS_LANDLOCK_ADD_RULE, fd, LANDLOCK_RULE_PATH_BENEATH, ctypes.addressof(rule), 0) != 0:
                raise JailError(ctypes.get_errno(), f"landlock_add_rule {path}")
        finally:
            os.close(parent)


def restrict() -> None:
    """In a fresh candidate (the spawner's child, before it reads anything): enter a Landlock
    domain of its own from the prepared ruleset; no-op where there is none."""
    p = _prepared
    if p is not None and p.ruleset_fd >= 0 and p.syscall(SYS_LANDLOCK_RESTRICT_SELF, p.ruleset_fd, 0, 0, 0) != 0:
        raise JailError(ctypes.get_errno(), "landlock_restrict_self")
