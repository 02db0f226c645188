"""Issue 15, finding 12's /dev/shm half: no scratch shared between concurrent jobs.

multiprocessing needs /dev/shm (sem_open, shm_open at a fixed path). Each slot of a runner
has a tmpfs of its own there (sandbox/runner/slotns.py), so a job filling it (bytes, inodes,
semaphores) never makes a concurrent job's Pool(), Lock() or SharedMemory fail, a name one
job makes is not there for another, and nothing is left for the next job. Every pool here
has ONE runner, so the concurrent jobs are on slots of the same runner (what used to share
one /dev/shm). Both hosts; through HTTP once per host.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from sandbox import ExecRequest, Job, Limits, make_pool
from sandbox.hosts import bwrap as bwrap_host
from tests.conftest import kind_params
from tests.sandbox.conftest import no_runner_lost

HOLD_S = 3.0  # how long a hostile job keeps its /dev/shm full
START_AFTER_S = 0.5  # when the honest job starts (it then runs for HONEST_S: past the filling)

FILLERS = {
    # big files (each under the job's RLIMIT_FSIZE) until ENOSPC
    "bytes": (
        "import os, time\nn = 0\n"
        "try:\n    while True:\n        fd = os.open(f'/dev/shm/big{n >> 23}', os.O_CREAT | os.O_WRONLY, 0o600)\n"
        "        for _ in range(8):\n            n += os.write(fd, b'\\1' * (1 << 20))\n        os.close(fd)\n"
        "except OSError as e:\n    print('full', e.errno, n >> 20)\n"
        f"time.sleep({HOLD_S})\n"
    ),
    # empty files until no inode is left
    "inodes": (
        "import os, time\nn = 0\n"
        "try:\n    while True:\n        os.close(os.open(f'/dev/shm/f{n}', os.O_CREAT | os.O_WRONLY, 0o600))\n"
        "        n += 1\nexcept OSError as e:\n    print('full', e.errno, n)\n"
        f"time.sleep({HOLD_S})\n"
    ),
    # POSIX semaphores (each an inode and a page of /dev/shm) held open
    "semaphores": (
        "import multiprocessing as mp, time\nheld = []\n"
        "try:\n    while True:\n        held.append(mp.Semaphore())\n"
        "except OSError as e:\n    print('full', e.errno, len(held))\n"
        f"time.sleep({HOLD_S})\n"
    ),
}

# multiprocessing's Pool, Lock and a SharedMemory (every page touched: a full tmpfs gives
# SIGBUS there), again and again for a while, so that it overlaps a filler holding /dev/shm full
HONEST = (
    "import multiprocessing as mp, time\nfrom multiprocessing import shared_memory\n"
    "def sq(x):\n    return x * x\n"
    "if __name__ == '__main__':\n    t0, rounds = time.monotonic(), 0\n"
    "    while rounds == 0 or time.monotonic() - t0 < SECONDS:\n"
    "        with mp.Pool(2) as p:\n            total = sum(p.map(sq, range(100)))\n"
    "        s = shared_memory.SharedMemory(create=True, size=1 << 20)\n        s.buf[:] = b'\\1' * (1 << 20)\n"
    "        pages = sum(s.buf[::4096])\n        s.close()\n        s.unlink()\n"
    "        with mp.Lock():\n            rounds += 1\n"
    "    print(total, pages)\n"
)
HONEST_OUT = "328350 256\n"
# how long the honest job keeps at it: past the filler's filling (16384 shared semaphores took
# 6.7 s to make in a docker runner with one shared /dev/shm; its own 4096 take 0.3 s)
HONEST_S = {"bytes": 4.0, "inodes": 4.0, "semaphores": 9.0}


@pytest_asyncio.fixture(scope="module", params=kind_params())
async def one_runner(request):
    p = make_pool(request.param, size=1, per_runner=3)
    await p.start()
    yield p
    await p.close()


def _lim(timeout_s: float = 10.0, memory_mb: int = 256) -> Limits:
    return Limits(timeout_s=timeout_s, memory_mb=memory_mb)


async def _later(coro, delay: float):
    await asyncio.sleep(delay)
    return await coro


@pytest.mark.parametrize("attack", sorted(FILLERS))
async def test_a_job_filling_dev_shm_never_fails_a_concurrent_one(one_runner, attack):
    pool = one_runner
    async with no_runner_lost(pool):
        hostile, honest = await asyncio.gather(
            pool.execute(ExecRequest(program=FILLERS[attack], limits=_lim())),
            _later(pool.execute(ExecRequest(program=HONEST.replace("SECONDS", str(HONEST_S[attack])),
                                            limits=_lim(20.0, memory_mb=1024))), START_AFTER_S),
            # what this proves is /dev/shm's isolation, so the honest job has room: its Pool's 3
            # threads have 8 MiB stacks each, and before the runner capped malloc arenas (64 MiB of
            # address space apiece) 256 MiB gave "can't start new thread" under load
        )
        assert hostile.status == "finished" and hostile.stdout.startswith("full 28 "), hostile  # ENOSPC, its own
        assert (honest.status, honest.stdout, honest.stderr) == ("finished", HONEST_OUT, ""), honest
        assert hostile.runner == honest.runner, (hostile.runner, honest.runner)


START_METHODS = (
    "import multiprocessing as mp, subprocess, sys\n"
    "def sq(x):\n    return x * x\n"
    "if __name__ == '__main__':\n    out = []\n"
    "    for method in ('fork', 'spawn', 'forkserver'):\n        ctx = mp.get_context(method)\n"
    "        with ctx.Pool(2) as p:\n            out.append(sum(p.map(sq, range(10))))\n"
    "        with ctx.Lock():\n            pass\n"
    "    code = ('from multiprocessing import shared_memory as m; s = m.SharedMemory(create=True, size=1 << 20); '\n"
    "            \"s.buf[:] = b'\\\\1' * (1 << 20); print(sum(s.buf[::4096])); s.close(); s.unlink()\")\n"
    "    out.append(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True).stdout.strip())\n"
    "    print(*out)\n"
)


async def test_every_start_method_and_subprocesses_get_the_slots_dev_shm(one_runner):
    """fork, spawn and forkserver children, and a subprocess, use the slot's /dev/shm beside a
    concurrent filler (a mount namespace is inherited by every child, exec or not)."""
    pool = one_runner
    async with no_runner_lost(pool):
        hostile, honest = await asyncio.gather(
            pool.execute(ExecRequest(program=FILLERS["inodes"], limits=_lim())),
            _later(pool.execute(ExecRequest(program=START_METHODS, limits=_lim(20.0))), START_AFTER_S),
        )
    assert hostile.stdout.startswith("full 28 "), hostile
    assert (honest.status, honest.stdout) == ("finished", "285 285 285 256\n"), honest


async def test_dev_shm_names_are_not_shared_between_concurrent_jobs(one_runner):
    """What one job makes in /dev/shm (a file, a named SharedMemory) does not exist for a job
    running at the same time, which sees an empty file system of its own."""
    tag = os.urandom(4).hex()
    maker = (
        "import os, time\nfrom multiprocessing import shared_memory\n"
        f"fd = os.open('/dev/shm/marker-{tag}', os.O_CREAT | os.O_WRONLY, 0o644)\nos.write(fd, b'secret')\n"
        f"s = shared_memory.SharedMemory(name='shm-{tag}', create=True, size=4096)\ns.buf[:6] = b'secret'\n"
        f"print('made')\ntime.sleep({HOLD_S})\ns.close()\n"
    )
    looker = (
        "import os\nfrom multiprocessing import shared_memory\n"
        f"for path in ('/dev/shm/marker-{tag}', '/dev/shm/shm-{tag}'):\n"
        "    try:\n        print(open(path).read())\n    except OSError as e:\n        print(type(e).__name__)\n"
        f"try:\n    shared_memory.SharedMemory(name='shm-{tag}')\n    print('opened')\nexcept OSError as e:\n"
        "    print(type(e).__name__)\n"
        "try:\n    print(os.listdir('/dev/shm'))\nexcept OSError as e:\n    print(type(e).__name__)\n"
        "st = os.statvfs('/dev/shm')\nprint(st.f_bfree == st.f_blocks, st.f_files - st.f_ffree)\n"
    )
    async with no_runner_lost(pool := one_runner):
        made, seen = await asyncio.gather(
            pool.execute(ExecRequest(program=maker, limits=_lim())),
            _later(pool.execute(ExecRequest(program=looker, limits=_lim())), START_AFTER_S),
        )
    assert made.stdout == "made\n", made
    assert seen.stdout.splitlines() == ["FileNotFoundError"] * 3 + ["PermissionError", "True 1"], seen
    assert made.runner == seen.runner


async def test_nothing_a_job_leaves_in_dev_shm_reaches_the_next(one_runner):
    """Files, a directory tree the owner cannot even list, semaphores and shared memory left
    behind: every later job on every slot sees an empty /dev/shm."""
    leaver = (
        "import os, multiprocessing as mp\nfrom multiprocessing import shared_memory\n"
        "os.makedirs('/dev/shm/d/e/f')\nopen('/dev/shm/d/e/f/x', 'w').write('x')\nos.chmod('/dev/shm/d/e', 0)\n"
        "os.symlink('/etc/passwd', '/dev/shm/link')\nopen('/dev/shm/plain', 'w').write('left')\n"
        "s = shared_memory.SharedMemory(name='left-shm', create=True, size=1 << 16)\n"
        "sems = [mp.Semaphore() for _ in range(10)]\n"
        "st = os.statvfs('/dev/shm')\nprint(st.f_files - st.f_ffree > 10, flush=True)\nos._exit(0)\n"  # no unlink, no close
    )
    check = (
        "import os\nst = os.statvfs('/dev/shm')\n"
        "print(st.f_bfree == st.f_blocks, st.f_files - st.f_ffree, os.path.lexists('/dev/shm/plain'))\n"
    )
    pool = one_runner
    async with no_runner_lost(pool):
        r = await pool.execute(ExecRequest(program=leaver, limits=_lim()))
        assert r.stdout == "True\n", r
        # as many at once as the runner has slots: every slot's /dev/shm, the leaver's among them
        after = await asyncio.gather(*(pool.execute(ExecRequest(program=check, limits=_lim())) for _ in range(6)))
    for a in after:
        assert a.stdout == "True 1 False\n", a


RUNNER_CAP_BITS = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_FOWNER": 3, "CAP_KILL": 5, "CAP_SETGID": 6,
                   "CAP_SETUID": 7, "CAP_SETPCAP": 8}


async def test_no_runner_process_keeps_cap_sys_admin(one_runner):
    """The keepers needed CAP_SYS_ADMIN once, at start-up: afterwards every runner process
    (main, keepers, supervisors, spawners, candidates, verdicts) holds exactly what it held
    before (the runner caps; none in a job's processes, an empty bounding set in candidates,
    one forked ahead for the next job still root's until it drops), CAP_SYS_ADMIN in no set, the
    bounding set included."""
    want = sum(1 << RUNNER_CAP_BITS[c] for c in bwrap_host.RUNNER_CAPS)
    probe = (
        "import os\nfor p in sorted(os.listdir('/proc')):\n    if p.isdigit():\n        try:\n"
        "            comm = open(f'/proc/{p}/comm').read().strip()\n"
        "            caps = {l.split(':')[0]: int(l.split(':')[1], 16) for l in open(f'/proc/{p}/status') "
        "if l.startswith('Cap')}\n"
        "        except OSError:\n            continue\n"
        "        print(comm, caps['CapEff'], caps['CapPrm'], caps['CapBnd'], caps['CapInh'], caps['CapAmb'])\n"
    )
    r = await one_runner.execute(ExecRequest(program=probe, limits=_lim()))
    rows = [line.split() for line in r.stdout.splitlines()]
    ours = [(comm, *map(int, sets)) for comm, *sets in rows if comm.startswith("vr-")]
    kinds = {comm.rstrip("0123456789-") for comm, *_ in ours}
    assert {"vr-runner", "vr-slot", "vr-super", "vr-spawner", "vr-candidate"} <= kinds, rows
    for comm, eff, prm, bnd, inh, amb in ours:
        assert not (eff | prm | bnd | inh | amb) & (1 << 21), (comm, eff, prm, bnd, inh, amb)
        if comm == "vr-verdict":
            assert (eff, prm) == (0, 0), (comm, eff, prm)
        elif comm == "vr-candidate":  # a job's: nothing; one forked for the next job: still root's
            assert (eff, prm) in ((0, 0), (want, want)) and bnd == 0, (comm, eff, prm, bnd)
        else:
            assert (eff, prm) == (want, want), (comm, eff, prm)
    for comm, *sets in rows:  # nothing else in the runner's view (bwrap's own pid 1 holds none)
        assert not any(int(s) & (1 << 21) for s in sets[:2]), (comm, sets)


async def test_no_directory_is_writable_by_two_jobs(one_runner):
    """Outside its own scratch and its slot's /dev/shm, a job can make a file nowhere (so no
    path is shared scratch between concurrent jobs): the whole tree is walked and tried."""
    walker = (
        "import os\nmine = {os.path.realpath(os.getcwd()), '/dev/shm'}\nfound = []\n"
        "for root, dirs, files in os.walk('/'):\n"
        "    if root in ('/proc', '/sys') or root.startswith(('/proc/', '/sys/')):\n        dirs[:] = []\n"
        "        continue\n"
        "    if os.path.realpath(root) in mine:\n        dirs[:] = []\n        continue\n"
        "    p = os.path.join(root, '.vr-probe')\n"
        "    try:\n        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))\n"
        "    except OSError:\n        continue\n"
        "    found.append(root)\n    os.unlink(p)\n"
        "print('writable:', found)\nown = []\n"
        "for d in sorted(mine):\n    p = os.path.join(d, '.vr-probe')\n"
        "    os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))\n    os.unlink(p)\n    own.append(d)\n"
        "print(len(own))\n"  # the probe itself works: where it may write, it finds it
    )
    r = await one_runner.execute(ExecRequest(program=walker, limits=_lim(30.0)))
    assert r.stdout == "writable: []\n2\n", r


async def test_a_full_dev_shm_is_the_jobs_own_failure(one_runner):
    """A grading job that fills /dev/shm fails its own tests (no infra_error, no runner lost)."""
    prog = FILLERS["inodes"].replace(f"time.sleep({HOLD_S})\n", "") + "def f():\n    return 1\n"
    j = Job(program=prog, tests={"kind": "assert", "asserts": ["assert f() == 2", "assert f() == 1"]},
            limits=Limits(timeout_s=5, memory_mb=256))
    async with no_runner_lost(one_runner):
        r = await one_runner.run(j)
    assert (r.runs, r.passed, r.total) == (True, 1, 2), r


# ------------------------------------------------------------------ through HTTP

_spec = importlib.util.spec_from_file_location("server_plumbing", Path(__file__).parents[1] / "server" / "conftest.py")
server_plumbing = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(server_plumbing)


@pytest.fixture(scope="module", params=kind_params())
def url(request):
    s = server_plumbing.start_server(sandbox=request.param, pool_size=1, pool_slots=6)
    yield s.url
    s.stop()


def test_dev_shm_fillers_do_not_cost_honest_items_over_http(url):
    """One /v1/score batch on a one-runner server: the three fillers beside honest items
    that each use a Pool, a Lock and a SharedMemory while the fillers hold /dev/shm full."""
    stdio = {"kind": "stdio", "cases": [{"stdin": "", "stdout": HONEST_OUT}]}
    items = [{"id": f"fill-{a}", "completion": f"```python\n{FILLERS[a]}\ndef f():\n    return 1\n```",
              "task": {"type": "code", "timeout_s": 10, "tests": {"kind": "assert", "asserts": ["assert f() == 2"]}}}
             for a in sorted(FILLERS)]
    items += [{"id": f"honest-{i}", "completion": f"```python\n{HONEST.replace('SECONDS', '4.0')}```",
               "task": {"type": "code", "timeout_s": 10, "tests": stdio}} for i in range(3)]
    resp = httpx.post(url + "/v1/score", json={"items": items}, timeout=120)
    assert resp.status_code == 200, resp.text
    res = {r["id"]: r for r in resp.json()["results"]}
    for i in range(3):
        assert res[f"honest-{i}"]["status"] == "ok" and res[f"honest-{i}"]["reward"] == pytest.approx(1.0), res
    for a in FILLERS:
        r = res[f"fill-{a}"]
        assert r["status"] == "ok" and r["reward"] is not None and r["reward"] < 1.0, r


# ------------------------------------------------------------------ start-up, fail closed


def test_slot_shm_argument_is_checked():
    from sandbox.runner.slotns import ShmSpec

    assert ShmSpec.parse("64,4096") == ShmSpec(64, 4096) and ShmSpec(64, 4096).arg() == "64,4096"
    for bad in ("0,10", "64,-1", "64", "a,b"):
        with pytest.raises(ValueError):
            ShmSpec.parse(bad)


@pytest.mark.skipif(os.geteuid() != 0, reason="a per-slot /dev/shm needs a root bwrap host")
def test_a_runner_that_cannot_make_its_slots_dev_shm_does_not_start(tmp_path):
    """Asked for a /dev/shm per slot but without CAP_SYS_ADMIN to make it, the runner exits
    before it binds its socket (it never serves with a shared one it was asked not to have)."""
    import subprocess

    from sandbox.runner.slotns import ShmSpec

    sock = tmp_path / "sock"
    sock.mkdir()
    cmd = bwrap_host.bwrap_command(str(sock), slots=2, tmp_mb=16, slot_shm=ShmSpec(8, 64))
    i = cmd.index("CAP_SYS_ADMIN")
    del cmd[i - 1 : i + 1]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "no /dev/shm of its own" in r.stderr, (r.returncode, r.stderr[-2000:])
    assert not (sock / "runner.sock").exists()
