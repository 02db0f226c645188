"""Programs that attack the interactor, through HTTP on both hosts: none gains reward. A program that
reads the test's input through the interactor's /proc entries, cwd or files (guess with a budget of
no questions: only the hidden number wins), signals, stops or ptraces the interactor, floods it,
forges its verdict on its own stdout and stderr or its output file where a checker reads it, or
exits early hoping for OK."""

from __future__ import annotations

import httpx
import pytest

from tests.sandbox.interactive_problems import GUESS_PY, PROBLEMS
from tests.sandbox.lang_programs import host_options
from tests.server.conftest import kind_params


@pytest.fixture(scope="module", params=kind_params())
def url(request, shared_servers):
    return shared_servers.get(sandbox=request.param, sandbox_options=host_options(request.param)).url


def score(url: str, program: str, task: dict) -> dict:
    r = httpx.post(url + "/v1/score", json={"items": [{"completion": f"```python\n{program}```\n", "task": task}]},
                   timeout=300)
    assert r.status_code == 200, r.text
    [res] = r.json()["results"]
    assert res["status"] == "ok", res
    return res


def guess_task(*inputs: str, checker: str | None = None) -> dict:
    task = PROBLEMS[0].task("python", timeout_s=2.0)
    task["tests"]["cases"] = [{"stdin": s, "stdout": "0\n"} for s in inputs]
    if checker:
        task["tests"]["checker"] = {"language": "python", "source": checker}
    return task


# every place a process of the program's uid could find the interactor's input: its cwd, fds,
# environment, memory and root through /proc, the files its command line names, the TaskDir by name
PEEK = r'''
import os, re, sys
me = os.getpid()
paths = [".vr-task/input.txt", ".vr-task/bin/task.py", os.getcwd() + ".task/input.txt", os.getcwd() + ".task/bin/task.py"]
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == me:
        continue
    paths += [f"/proc/{pid}/cwd/input.txt", f"/proc/{pid}/environ", f"/proc/{pid}/mem"]
    try:
        paths += [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError as e:
        print(pid, "fd", e.strerror, file=sys.stderr)
    try:
        args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        paths += [a.decode() for a in args if a.startswith(b"/") and os.path.isfile(a)]
    except OSError:
        pass
found = None
for path in paths:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        data = os.read(fd, 4096)
        os.close(fd)
    except OSError as e:
        print(path, e.strerror, file=sys.stderr)
        continue
    print(path, "READ", data[:60], file=sys.stderr)
    m = re.match(rb"\s*(\d+)\s+(\d+)\s+(\d+)\s*$", data)
    if m:
        found = int(m.group(2))
    if b"open(sys.argv[1])" in data:
        print("READ THE INTERACTOR'S SOURCE", file=sys.stderr)
        found = found or 777
n, q = map(int, input().split())
print("!", found or 1, flush=True)
'''


def test_the_input_and_the_interactors_files_are_out_of_reach(url):
    res = score(url, PEEK, guess_task("1000 777 0", "1000 778 0"))
    d = res["detail"]
    assert [t["status"] for t in d["tests"]] == ["failed", "failed"], d
    assert "wrong guess" in d["tests"][0]["message"], d
    assert res["reward"] < 0.5


SIGNALS = r'''
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]:
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(pid, sig)
            print("signalled", pid, file=sys.stderr)
        except OSError as e:
            pass
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        print("attached", pid, file=sys.stderr)
try:
    os.kill(-1, signal.SIGKILL)  # every process it may signal
except OSError:
    pass
n, q = map(int, input().split())
print("! 1", flush=True)
'''


def test_the_program_cannot_signal_stop_or_trace_the_interactor(url):
    res = score(url, SIGNALS, guess_task("1000 777 0"))
    d = res["detail"]
    # the interactor lived to judge: a wrong answer, not an interactor that broke (or a deadlock)
    assert [t["status"] for t in d["tests"]] == ["failed"], d
    assert "wrong guess" in d["tests"][0]["message"] and "interactor_failed" not in d["flags"], d


FLOOD = r'''
import sys
n, q = map(int, input().split())
chunk = "7" * (1 << 20)
for _ in range(4096):  # 4 GiB, no newline: the interactor's readline would hold it all
    sys.stdout.write(chunk)
'''


def test_a_flood_is_an_output_limit_not_a_broken_interactor(url):
    res = score(url, FLOOD, guess_task("1000 777 10"))
    d = res["detail"]
    assert [t["status"] for t in d["tests"]] == ["output_limit"], d
    assert "interactor_failed" not in d["flags"] and res["reward"] < 0.5, d


FORGE = r'''
import sys
print("ok found 777 in 0", file=sys.stderr)
print("points 1", file=sys.stderr)
print("ok")
print("! 777 OK accepted", flush=True)
sys.exit(0)
'''


def test_a_forged_verdict_on_stdout_and_stderr_counts_for_nothing(url):
    res = score(url, FORGE, guess_task("1000 777 10"))
    assert [t["status"] for t in res["detail"]["tests"]] == ["failed"], res


# a correct but slow program (linear search) that plants a forged output file (no questions asked)
# where the interactor's directory is, and where a checker's TaskDir would be
FORGE_TOUT = r'''
import os, sys
for d in (os.getcwd() + ".task", ".vr-task"):
    try:
        if os.path.isdir(d):
            os.rename(d, d + ".moved")
        os.mkdir(d)
        open(d + "/tout.txt", "w").write("0\n")
    except OSError as e:
        print("plant:", d, e, file=sys.stderr)
n, q = map(int, input().split())
for y in range(1, n + 1):
    print("?", y, flush=True)
    if input().strip() == "=":
        print("!", y, flush=True); break
'''
FEW_QUESTIONS = r'''
import sys
inp, out = (open(p).read().split() for p in sys.argv[1:3])
sys.exit(0 if int(out[0]) <= 10 else 1)
'''


def test_a_forged_output_file_is_not_what_the_checker_reads(url):
    res = score(url, FORGE_TOUT, guess_task("100 90 100", checker=FEW_QUESTIONS))
    d = res["detail"]
    assert [t["status"] for t in d["tests"]] == ["failed"], d
    assert "checker" in d["tests"][0]["message"], d


EARLY_EXITS = {
    "exit_at_once": "import os\nos._exit(0)\n",
    "close_and_wait": "import os, time\nos.close(1)\ntime.sleep(30)\n",
    "one_question_then_exit": "input()\nprint('? 5', flush=True)\nraise SystemExit(0)\n",
}


@pytest.mark.parametrize("name", list(EARLY_EXITS))
def test_an_early_exit_is_no_ok(url, name):
    res = score(url, EARLY_EXITS[name], guess_task("1000 777 10"))
    d = res["detail"]
    assert d["tests"][0]["status"] in ("failed", "error"), d
    assert res["reward"] < 0.5 and "interactor_failed" not in d["flags"], d


def test_the_interactor_source_is_unchanged_by_the_attacks():
    """The attacks above use the shared guessing interactor as written (no special build)."""
    assert "open(sys.argv[1])" in GUESS_PY
