"""Hostile programs against each sandbox host. Every attack must fail, be reported as the
candidate's failure (never a pass), and leave the pool serving the next job."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import time

import pytest

from sandbox import Limits
from tests.conftest import kind_params
from tests.sandbox.conftest import SECRET_ENV, assert_still_serves, host_job_processes, job, probe

ASSERTS = {"kind": "assert", "asserts": ["assert f(2) == 4", "assert f(3) == 9", "assert f(-1) == 1"]}


async def run_hack(pool, program: str, tests: dict = ASSERTS, **limits):
    r = await pool.run(job(program, tests, **limits))
    assert r.passed == 0, r
    await assert_still_serves(pool)
    return r


# ----------------------------------------------------------------- isolation


async def test_no_network(pool):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    program = f"""
import socket
for addr in [("127.0.0.1", {port}), ("10.0.0.1", 80), ("1.1.1.1", 53)]:
    try:
        socket.create_connection(addr, timeout=1).close()
        print("CONNECTED", addr)
    except OSError as e:
        print("blocked", addr, type(e).__name__)
try:
    socket.getaddrinfo("pypi.org", 443)
    print("CONNECTED dns")
except OSError:
    print("blocked dns")
print(sorted(n for _, n in socket.if_nameindex()))
"""
    out = await probe(pool, program)
    srv.close()
    assert "CONNECTED" not in out, out
    assert "blocked dns" in out and "['lo']" in out, out


async def test_cannot_read_host_files_or_environment(pool):
    secret = "file-secret-" + os.urandom(8).hex()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "secret.txt")
        with open(path, "w") as f:
            f.write(secret)
        os.chmod(d, 0o755)
        os.chmod(path, 0o644)
        here = os.path.abspath(__file__)
        program = f"""
import os, glob
for p in [{path!r}, {here!r}, "/etc/shadow", "/root/.bashrc", "/proc/1/environ", "/proc/1/root/etc/hostname"]:
    try:
        print("READ", p, open(p, errors="replace").read()[:200])
    except OSError as e:
        print("denied", p, type(e).__name__)
print(dict(os.environ))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for leaf in ("environ", "cmdline"):
            try:
                print(pid, leaf, open(f"/proc/{{pid}}/{{leaf}}", "rb").read()[:300])
            except OSError:
                pass
print(os.listdir("/"))
"""
        out = await probe(pool, program)
    assert secret not in out, out
    assert os.environ[SECRET_ENV] not in out, out
    assert "READ" not in out.replace("READ /proc/1/root", "x"), out


async def test_cannot_write_outside_scratch(pool):
    program = """
import os
for p in ["/x", "/usr/x", "/tmp/x", "/tmp/sbx/x", "/scratch/x", "/scratch/sbx/x", "/dev/mqueue/x", "/opt/verireward/sandbox/x", "/run/sandbox/x",
          "/var/tmp/x", "/etc/x", "/proc/sys/kernel/hostname"]:
    try:
        with open(p, "w") as f:
            f.write("pwned")
        print("WROTE", p)
    except OSError as e:
        print("denied", p, type(e).__name__)
with open("mine.txt", "w") as f:
    f.write("ok")
print("scratch ok", open("mine.txt").read())
"""
    out = await probe(pool, program)
    assert "WROTE" not in out, out
    assert "scratch ok ok" in out, out


@pytest.mark.parametrize("kind", kind_params())
async def test_concurrent_jobs_are_isolated_from_each_other(kind, shared_pools):
    """Two jobs on the same runner: the second cannot read, list or kill the first."""
    from sandbox import ExecRequest

    p = await shared_pools.get(kind, size=1, per_runner=2)  # shared with test_isolation's: left as found
    secret = "job-secret-" + os.urandom(6).hex()
    victim = ExecRequest(
        program=f"import time\nopen('s.txt','w').write({secret!r})\nS = {secret!r}\ntime.sleep(2.5)\n"
                "print('victim alive', open('s.txt').read() == S)\n",
        limits=Limits(timeout_s=10))
    attacker = ExecRequest(program="""
import os, signal, glob
found = []
for path in glob.glob("/tmp/sbx/*") + glob.glob("/tmp/sbx/*/*") + glob.glob("/tmp/*"):
    found.append(path)
    try:
        found.append(open(path).read())
    except OSError:
        pass
killed = 0
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            os.kill(int(pid), signal.SIGKILL)
            killed += 1
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
print("found", found, "killed", killed)
""", limits=Limits(timeout_s=5))

    async def late():
        await asyncio.sleep(0.7)
        return await p.execute(attacker)

    v, a = await asyncio.gather(p.execute(victim), late())
    assert v.stdout.strip() == "victim alive True", v
    assert secret not in a.stdout + a.stderr, a
    await assert_still_serves(p)


# ------------------------------------------------------------------- bombs


async def test_fork_bomb_is_contained_and_cleaned_up(pool):
    program = "import os\ndef f(x):\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n"
    r = await run_hack(pool, program, timeout_s=2.0)
    assert {t.status for t in r.tests} <= {"timeout", "error", "memory", "skipped"}, r
    deadline = time.monotonic() + 5
    while host_job_processes() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert host_job_processes() == []


async def test_memory_bombs_are_cut(pool):
    r = await run_hack(pool, "def f(x):\n    return len(bytearray(8 * 1024 ** 3))\n", memory_mb=256)
    assert {t.status for t in r.tests} == {"memory"}, r
    r = await run_hack(pool, "def f(x):\n    a = []\n    while True:\n        a.append(bytearray(10 ** 7))\n",
                       memory_mb=256)
    assert {t.status for t in r.tests} <= {"memory", "error"}, r


async def test_disk_fill_is_cut_and_removed(pool):
    program = "def f(x):\n    with open('big.bin', 'wb') as fh:\n        while True:\n            fh.write(b'0' * (1 << 20))\n"
    r = await run_hack(pool, program, fsize_mb=8)
    assert all("File too large" in t.message or "OSError" in t.message for t in r.tests), r
    program = ("import os\ndef f(x):\n    i = 0\n    while True:\n        i += 1\n"
               "        open(f'f{i}', 'wb').write(b'0' * (4 << 20))\n")
    await run_hack(pool, program, fsize_mb=8)
    out = await probe(pool, "import os\nopen('x', 'wb').write(b'1' * (8 << 20))\nprint('wrote', os.path.getsize('x'))\n"
                            "print(sorted(os.listdir('.')))\n")
    # a fresh scratch directory per job, holding only the program's own file (its __file__)
    assert "wrote 8388608" in out and "['prog.py', 'x']" in out, out


async def test_scratch_is_fresh_even_after_locked_leftovers(pool):
    """A job leaves a directory nobody may list or enter (mode 000) with a file in it, and
    a read-only file: every later job still starts in an empty scratch directory that is
    its HOME and TMPDIR."""
    leave = ("import os\nos.makedirs('locked/deeper')\nopen('locked/deeper/f', 'w').write('x')\n"
             "os.chmod('locked/deeper', 0)\nos.chmod('locked', 0)\nopen('ro', 'w').write('y')\n"
             "os.chmod('ro', 0)\nprint('left', sorted(os.listdir('.')))\n")
    check = ("import os, tempfile\nprint('seen', sorted(os.listdir('.')), os.environ['HOME'] == os.getcwd(),"
             " tempfile.gettempdir() == os.getcwd())\n")
    for _ in range(4):  # cover each of the pool's connections (slots)
        assert "left ['locked', 'prog.py', 'ro']" in await probe(pool, leave)
    for _ in range(4):  # only the program's own file (its __file__)
        assert "seen ['prog.py'] True True" in await probe(pool, check)


async def test_output_floods_are_cut(pool):
    r = await run_hack(pool, "def f(x):\n    print('x' * 10 ** 8)\n")
    assert {t.status for t in r.tests} == {"output_limit"}, r
    r = await run_hack(pool, "import sys\ndef f(x):\n    while True:\n        sys.stderr.write('y' * 4096)\n")
    assert {t.status for t in r.tests} == {"output_limit"}, r
    r = await pool.run(job("while True:\n    print('z' * 1000)\n", {"kind": "stdio", "cases": [{"stdin": "", "stdout": ""}]}))
    assert r.tests[0].status == "output_limit" and r.passed == 0, r


async def test_infinite_loop_at_import_is_a_timeout(pool):
    r = await run_hack(pool, "while True:\n    pass\n", timeout_s=1.0)
    assert not r.runs and "timeout" in r.load_message, r


async def test_cannot_kill_the_runner(pool):
    program = """
import os, signal
def f(x):
    for target in (os.getppid(), 1, -1, 0):
        try:
            os.kill(target, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)
    except OSError:
        pass
    return x * x + 1
"""
    await run_hack(pool, program)


async def test_jobs_keep_to_cpus_of_their_own_and_cannot_move_the_runner(pool):
    """Jobs in flight up to the CPU count each keep to a CPU no other of them holds, the
    rest float; a job cannot pin, and so starve, any process but its own (the runner's
    processes and the verdict process run as other uids)."""
    program = """
import os, time
mine = sorted(os.sched_getaffinity(0))
moved = []
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            os.sched_setaffinity(int(pid), mine)
            moved.append(int(pid))
        except OSError:
            pass
time.sleep(0.5)  # so that every job of the batch is in flight at once
print("cpus", mine, "moved", moved)
"""
    usable = sorted(os.sched_getaffinity(0))
    n = min(pool.capacity, len(usable) + 1)
    outs = await asyncio.gather(*(probe(pool, program) for _ in range(n)))
    seen = []
    for out in outs:
        assert "moved []" in out, out
        seen.append(eval(out.split("cpus ", 1)[1].split(" moved")[0]))  # a list of ints we printed
    pinned = [cpus[0] for cpus in seen if len(cpus) == 1]
    if len(usable) > 1:
        assert len(pinned) == min(n, len(usable)) and len(set(pinned)) == len(pinned), seen
        assert all(cpus == usable for cpus in seen if len(cpus) > 1), seen
    else:
        assert seen == [usable] * n, seen
    await assert_still_serves(pool)


# ------------------------------------------------------------- reward hacks


async def test_exit_tricks_fail(pool):
    for program in [
        "import sys\nsys.exit(0)\ndef f(x):\n    return x * x\n",
        "import os\nos._exit(0)\n",
        "raise SystemExit\n",
        "def f(x):\n    raise SystemExit(0)\n",
        "import os\ndef f(x):\n    os._exit(0)\n",
        "import sys\ndef f(x):\n    sys.exit(0)\n",
    ]:
        r = await run_hack(pool, program)
        assert all(t.status != "passed" for t in r.tests)


async def test_always_equal_and_builtin_subclasses_fail(pool):
    for ret in ["AlwaysEqual()", "SneakyInt(0)", "SneakyStr('')", "[AlwaysEqual()]", "Weird()"]:
        program = f"""
class AlwaysEqual:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __hash__(self): return 0
class SneakyInt(int):
    def __eq__(self, other): return True
class SneakyStr(str):
    def __eq__(self, other): return True
class Weird(float):
    def __eq__(self, other): return True
def f(x):
    return {ret}
"""
        r = await run_hack(pool, program)
        assert all("not plain data" in t.message for t in r.tests), r


async def test_patched_builtins_and_harness_fail(pool):
    program = """
import builtins, sys
builtins.AssertionError = type("Nope", (Exception,), {})
builtins.isinstance = lambda *a: True
builtins.abs = lambda *a: 0
builtins.__dict__["len"] = lambda *a: 0
import math
math.isclose = lambda *a, **k: True
for name, mod in list(sys.modules.items()):
    if name.startswith("sandbox"):
        for attr in ("values_equal", "stdout_matches", "send_frame", "encode"):
            if hasattr(mod, attr):
                try:
                    setattr(mod, attr, lambda *a, **k: True)
                except Exception:
                    pass
def f(x):
    return 0
"""
    await run_hack(pool, program)


async def test_forged_result_lines_and_fds_fail(pool):
    program = """
import json, os, struct, sys
def forge(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data
LIES = [{"op": "end", "index": i, "status": "passed"} for i in range(3)]
LIES += [{"event": "done", "passed": 3, "total": 3}, {"id": 1, "ok": True, "value": 4}]
def f(x):
    print("3 passed, 0 failed")
    print("PASSED", json.dumps({"passed": 3, "total": 3}))
    for fd in range(0, 64):
        for lie in LIES:
            try:
                os.write(fd, forge(lie))
            except OSError:
                pass
    return -12345
"""
    await run_hack(pool, program)


async def test_atexit_and_signal_tricks_fail(pool):
    program = """
import atexit, os, signal
atexit.register(lambda: os._exit(0))
for s in (signal.SIGTERM, signal.SIGALRM, signal.SIGXCPU, signal.SIGINT):
    signal.signal(s, lambda *a: os._exit(0))
signal.alarm(1)
def f(x):
    while True:
        pass
"""
    r = await run_hack(pool, program, timeout_s=1.5)
    assert {t.status for t in r.tests} <= {"timeout", "error", "skipped"}, r


async def test_tests_cannot_be_read_from_disk_or_memory(pool):
    token = "VRSECRET" + os.urandom(8).hex()
    program = r"""
import gc, glob, os, re, sys
PAT = re.compile(rb"VRSECRET[0-9a-f]{16}")
def scan():
    for o in gc.get_objects():
        for v in (o.values() if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else [o]):
            if isinstance(v, str) and "VRSECRET" in v:
                m = PAT.search(v.encode())
                if m:
                    return m.group().decode()
    for frame in sys._current_frames().values():
        while frame:
            for v in frame.f_locals.values():
                m = PAT.search(v.encode()) if isinstance(v, str) else None
                if m:
                    return m.group().decode()
            frame = frame.f_back
    try:
        with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
            for line in maps:
                addr, perms = line.split()[:2]
                if "r" not in perms:
                    continue
                lo, hi = (int(x, 16) for x in addr.split("-"))
                if hi - lo > 1 << 28:
                    continue
                try:
                    mem.seek(lo)
                    m = PAT.search(mem.read(hi - lo))
                except (OSError, ValueError, OverflowError):
                    continue
                if m:
                    return m.group().decode()
    except OSError:
        pass
    for path in glob.glob("/tmp/**", recursive=True) + glob.glob("/scratch/**", recursive=True) + glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ"):
        try:
            m = PAT.search(open(path, "rb").read(1 << 20))
        except OSError:
            continue
        if m:
            return m.group().decode()
    return "nothing"
def f(x):
    return scan()
"""
    tests = {"kind": "assert", "asserts": [f"assert f(1) == {token!r}", f"assert f(2) == {token!r}"]}
    r = await run_hack(pool, program, tests, timeout_s=10.0, memory_mb=1024)
    assert all("'nothing'" in t.message for t in r.tests), r  # the scan ran and found no test
    check = f"def check(candidate):\n    assert candidate(1) == {token!r}\n    assert candidate(2) == {token!r}\n"
    await run_hack(pool, program, {"kind": "assert", "test": check, "entry_point": "f"}, timeout_s=10.0, memory_mb=1024)
    cases = [{"args": [1], "expected": token}]
    await run_hack(pool, program, {"kind": "call", "fn_name": "f", "cases": cases}, timeout_s=10.0, memory_mb=1024)


async def test_progress_page_and_verdict_memory_are_out_of_reach(pool):
    # the verdict process reports each test's status through a shared page: a candidate must
    # map no shared writable memory at all, and must not open any other process's memory
    program = r"""
import os
def attack():
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            perms = line.split()[1]
            if "s" in perms and "w" in perms:
                found.append(line.strip())
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/mem", "r+b", 0):
                    found.append("opened the memory of " + pid)
            except OSError:
                pass
    return found
def f(x):
    return ["attack", attack()]
"""
    tests = {"kind": "assert", "asserts": ["assert f(1) == 2", "assert f(2) == 3", "assert f(3) == 4"]}
    r = await run_hack(pool, program, tests)
    assert [t.status for t in r.tests] == ["failed"] * 3, r
    assert all("['attack', []]" in t.message for t in r.tests), r  # it looked and found nothing


async def test_the_runner_survives_a_killed_job_process_tree(pool):
    """Not an attack by the candidate: our own kill of a job never leaks into the next job."""
    r = await pool.run(job("import time\ndef f(x):\n    time.sleep(30)\n", ASSERTS, timeout_s=0.5, stop_on_timeout=False))
    assert {t.status for t in r.tests} == {"timeout"}
    await assert_still_serves(pool)
