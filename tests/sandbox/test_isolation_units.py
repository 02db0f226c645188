"""The pieces under the isolation tests, on their own: the slot scratch as a file system of
its own (emptied, never removed; `scratch_full` for the SCRATCH_FULL flag), the uid lease,
and the seccomp program's shape."""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys

import pytest

from sandbox.runner import cleanup, seccomp, uidlease


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real tmpfs of 64 inodes and 1 MiB at tmp_path/s0 (root only: it is a mount)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path = tmp_path / "s0"
    path.mkdir()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", 0, b"size=1m,nr_inodes=64,mode=700") != 0:
        pytest.skip(f"cannot mount a tmpfs here: {os.strerror(ctypes.get_errno())}")
    cleanup.is_mount.cache_clear()
    yield str(path)
    libc.umount2(str(path).encode(), 2)  # MNT_DETACH
    cleanup.is_mount.cache_clear()


def test_scratch_on_its_own_tmpfs_is_emptied_and_full_is_seen(small_tmpfs):
    base, name = os.path.dirname(small_tmpfs), os.path.basename(small_tmpfs)
    path = cleanup.make_scratch(base, name, 4242)
    assert path == small_tmpfs and os.stat(path).st_uid == 4242 and cleanup.is_mount(path)
    assert not cleanup.scratch_full(path)
    n = 0
    with pytest.raises(OSError):
        while True:
            os.makedirs(os.path.join(path, "d", str(n)))
            n += 1
    assert n < 64
    assert cleanup.scratch_full(path)  # inodes
    os.chmod(os.path.join(path, "d"), 0)  # a directory its owner may not list
    cleanup.remove_tree(path)
    assert os.listdir(path) == [] and cleanup.is_mount(path)
    assert not cleanup.scratch_full(path)
    with pytest.raises(OSError):
        with open(os.path.join(path, "big"), "wb") as f:
            f.write(b"x" * (2 << 20))
    assert cleanup.scratch_full(path)  # bytes
    again = cleanup.make_scratch(base, name, 4243)
    assert again == path and os.listdir(path) == [] and os.stat(path).st_uid == 4243


def test_empty_fs_is_seen_by_its_inode_count_and_anything_left_is_removed(small_tmpfs, tmp_path):
    path = small_tmpfs
    assert cleanup.is_empty_fs(path)  # nothing but its root: the cleanup skips the listing
    assert not cleanup.is_empty_fs(str(tmp_path))  # not a file system with an inode count of its own
    os.symlink("/etc/passwd", os.path.join(path, "link"))  # a link is removed, never followed
    os.makedirs(os.path.join(path, "d", "e"))
    with open(os.path.join(path, "prog.py"), "w") as f:
        f.write("x = 1\n")
    held = open(os.path.join(path, "gone"), "w")  # noqa: SIM115 - an unlinked file still open holds its inode
    os.unlink(os.path.join(path, "gone"))
    try:
        assert not cleanup.is_empty_fs(path)
        cleanup.remove_tree(path)
        assert os.listdir(path) == [] and os.path.exists("/etc/passwd")
        assert not cleanup.is_empty_fs(path)  # the open inode still counts: a listing each time, never a skip
    finally:
        held.close()
    assert cleanup.is_empty_fs(path)
    cleanup.remove_tree(path)  # one statvfs, nothing to do
    assert os.listdir(path) == [] and cleanup.is_mount(path)


def test_uid_leases_are_exclusive_across_processes(tmp_path, monkeypatch):
    monkeypatch.setenv(uidlease.ENV_LEASE_DIR, str(tmp_path))
    mine = uidlease.lease(8)
    assert mine.base % uidlease.BLOCK == 0 and uidlease.UID_LO <= mine.base < uidlease.UID_HI
    assert uidlease.held(mine.base)
    # another process may not take the same block while we hold it
    code = ("import sys; from sandbox.runner import uidlease\n"
            f"print(uidlease.held({mine.base}))\n"
            "import fcntl, os\n"
            f"fd = os.open({os.path.join(str(tmp_path), f'{mine.base}.lock')!r}, os.O_RDWR)\n"
            "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('TOOK')\n"
            "except BlockingIOError:\n    print('refused')\n")
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "refused"], out
    assert mine.base not in {uidlease.lease(8, taken={mine.base}).base for _ in range(20)}
    mine.release()
    assert not uidlease.held(mine.base)
    # a killed holder's file stays; the sweep removes it, never a held one
    other = uidlease.lease(8)
    stale = tmp_path / "1048576.lock"
    stale.write_text("gone\n")
    assert uidlease.sweep() == 1 and not stale.exists() and uidlease.held(other.base)
    other.release()


def test_seccomp_program_refuses_namespaces_and_checks_the_arch():
    prog = seccomp.build_x86_64()
    ins = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    assert ins[0] == (0x20, 0, 0, 4)  # load the arch first
    assert ins[1][3] == seccomp.AUDIT_ARCH_X86_64 and ins[2] == (0x06, 0, 0, seccomp.RET_KILL_PROCESS)
    refused = {k for code, _jt, _jf, k in ins if code == 0x15}
    for name in ("unshare", "setns", "mount", "keyctl", "bpf", "ptrace", "perf_event_open", "io_uring_setup"):
        assert seccomp.X86_64_REFUSED[name] in refused
    assert len(prog) // 8 < 256  # every jump fits


def _run_filter(prog: bytes, nr: int, args: tuple[int, ...] = (), arch: int = seccomp.AUDIT_ARCH_X86_64) -> int:
    """What the kernel would answer: the classic-BPF program run on one struct seccomp_data."""
    words = list(args) + [0] * (6 - len(args))
    data = struct.pack("=iI8x6Q", nr, arch, *words)
    ins = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x06:
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf
        pc += 1


def test_seccomp_program_refuses_what_docker_refuses_and_every_unreviewed_call():
    prog = seccomp.build_x86_64()
    eperm, enosys = seccomp.RET_ERRNO | 1, seccomp.RET_ERRNO | 38
    for name in ("modify_ldt", "memfd_secret", "lsm_list_modules", "open_tree_attr", "file_setattr", "ptrace"):
        assert _run_filter(prog, seccomp.X86_64_REFUSED[name]) == eperm, name
    for nr in (seccomp.X86_64_FIRST_UNREVIEWED, 511, 548, 1000, 0x3FFFFFFF):
        assert _run_filter(prog, nr) == enosys, nr
    assert _run_filter(prog, 0x40000000 + 1) == eperm  # x32
    assert _run_filter(prog, 1, arch=0x40000003) == seccomp.RET_KILL_PROCESS  # i386
    for ok in (0, 1, 158, 318, 334, 444, 446, 448, 457, 462, 466):  # read, write, arch_prctl, getrandom, rseq, landlock...
        assert _run_filter(prog, ok) == seccomp.RET_ALLOW, ok
    assert _run_filter(prog, 56, (0x10000000,)) == eperm and _run_filter(prog, 56, (0x11,)) == seccomp.RET_ALLOW
