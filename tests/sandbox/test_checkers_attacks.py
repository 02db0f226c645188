"""Attacks on checkers through HTTP, both hosts: a candidate that reads or guesses the answer
file (by name, by walking the file system and /proc, with a process left behind to wait for it,
from a C++ program whose launcher outlives its tests), one that plants files where a checker
might read (a link at the task directory's name, files in its scratch, /tmp, /dev/shm, HOME),
one that forges a checker's words (testlib's "ok", "points 1", exit codes), one that floods, and
outputs that crash or hang the checker: none gains reward; a checker's crash on a candidate's
output fails that test, flagged checker_failed (never task_error, never infra_error)."""

from __future__ import annotations

import httpx
import pytest

from tests.sandbox.lang_programs import host_options
from tests.server.conftest import kind_params


@pytest.fixture(scope="module", params=kind_params())
def url(request, shared_servers) -> str:
    return shared_servers.get(sandbox=request.param, sandbox_options=host_options(request.param)).url


def score(url: str, items: list[dict]) -> list[dict]:
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=600)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def fence(program: str, language: str = "python") -> str:
    return f"```{language}\n{program}\n```"


# The answer is a secret the input does not tell; the same case three times, so an answer that
# leaked from one test (a file left behind, a process that saw it) would pass the next ones.
SECRET = "7f3c9a1e5b2d4c6a8e0f1a2b3c4d5e6f"
SECRET_CASES = [{"stdin": "guess\n", "stdout": SECRET + "\n"}] * 3
SECRET_CHECKER = ("import sys\nout, ans = open(sys.argv[2]).read(), open(sys.argv[3]).read()\n"
                  "sys.exit(0 if out.split() == ans.split() else 1)\n")


def secret_task(language: str = "python") -> dict:
    return {"type": "code", "language": language, "timeout_s": 3.0,
            "tests": {"kind": "stdio", "cases": SECRET_CASES, "checker": {"language": "python", "source": SECRET_CHECKER}}}


READ_ANSWER = r'''
import glob, os, sys, time
found = []
def grab(p):
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)  # a pipe of its own must not block it
        try:
            found.extend(os.read(fd, 4096).decode(errors="replace").split())
        finally:
            os.close(fd)
    except (OSError, ValueError):
        pass
here = os.getcwd()
names = [".vr-check/answer.txt", ".vr-task/answer.txt", "answer.txt", "../answer.txt", os.path.expanduser("~/.vr-check/answer.txt"),
         "/tmp/leak", "/dev/shm/leak", here + "/leak", here + "/../leak"]
for p in names:
    grab(p)
for pat in [os.path.dirname(here) + "/*/*", os.path.dirname(here) + "/*/.vr-*/*", here + "/**", here + "/.vr-*/*",
            os.path.dirname(here) + "-cache/*/*", "/tmp/**", "/dev/shm/**", "/proc/*/cwd/*", "/proc/*/cwd/.vr-*/*",
            "/proc/*/fd/*", "/proc/*/cmdline"]:
    for p in glob.glob(pat, recursive=True)[:300]:
        grab(p)
tokens = [t for t in found if len(t) == 32 and all(c in "0123456789abcdef" for c in t)]
print(tokens[0] if tokens else "nothing", flush=True)
if os.fork() == 0:  # left behind: waits for the answer file and leaks it for the next test
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # the run ends when its output pipes close: this one lets them
    if os.fork() == 0:
        for _ in range(200):
            for p in glob.glob(here + "/.vr-*/*") + glob.glob("/proc/*/cwd/*"):
                try:
                    data = open(p).read(4096)
                except OSError:
                    continue
                for leak in ("/tmp/leak", "/dev/shm/leak", here + "/leak", here + "/../leak"):
                    try:
                        with open(leak, "a") as f:
                            f.write(data)
                    except OSError:
                        pass
            time.sleep(0.01)
    os._exit(0)
'''

READ_ANSWER_CPP = r'''
#include <bits/stdc++.h>
#include <unistd.h>
#include <glob.h>
#include <fcntl.h>
std::string grab(const char* pat){ glob_t g; std::string r; if(glob(pat,0,nullptr,&g)==0){ for(size_t i=0;i<g.gl_pathc;i++){
  std::ifstream f(g.gl_pathv[i]); std::string t; while(f>>t) if(t.size()==32) r=t; } } globfree(&g); return r; }
int main(){
  const char* pats[]={".vr-check/*",".vr-task/*","/tmp/*","/dev/shm/*","/proc/*/cwd/*","/proc/*/cwd/.vr-*/*","../*/.vr-*/*"};
  std::string best; for(auto p:pats){ std::string r=grab(p); if(!r.empty()) best=r; }
  std::cout<<(best.empty()?"nothing":best)<<std::endl;
  if(fork()==0){ setsid(); int null=open("/dev/null",O_RDWR); dup2(null,0); dup2(null,1); dup2(null,2); for(int i=0;i<300;i++){ std::string r=grab(".vr-check/*"); if(r.empty()) r=grab("/proc/*/cwd/*");
      if(!r.empty()){ std::ofstream("/dev/shm/leak")<<r; std::ofstream("/tmp/leak")<<r; } usleep(10000);} _exit(0); } }
'''

PLANT = r'''
import os
here = os.getcwd()
for d in (here, "/tmp", "/dev/shm", os.path.expanduser("~")):
    for name in ("answer.txt", "output.txt", "input.txt"):
        try:
            with open(os.path.join(d, name), "w") as f:
                f.write("forged\n")
        except OSError:
            pass
os.makedirs(here + "/mine", exist_ok=True)
for name in ("answer.txt", "output.txt", "input.txt"):
    with open(here + "/mine/" + name, "w") as f:
        f.write("forged\n")
for name in (".vr-check", ".vr-task"):  # where the task directories are (kept between tests) or made
    try:
        os.rename(here + "/" + name, here + "/stolen" + name)
    except OSError:
        pass
    try:
        os.symlink(here + "/mine", here + "/" + name)
    except OSError:
        pass
try:
    os.chmod(here, 0o777)
except OSError:
    pass
print("forged")
'''


def test_answer_cannot_be_read_guessed_or_leaked(url):
    """Every way to the answer file fails: by name, by walking the scratch base, the cache, /tmp,
    /dev/shm and every process's cwd and descriptors, by a process left to wait for it (Python),
    and from a C++ program (its launcher lives between tests): no test passes."""
    items = [{"id": "py", "completion": fence(READ_ANSWER), "task": secret_task()},
             {"id": "cpp", "completion": fence(READ_ANSWER_CPP, "cpp"), "task": secret_task("cpp")}]
    for res in score(url, items):
        assert res["status"] == "ok", res
        d = res["detail"]
        assert d["passed"] == 0 and all(t["status"] == "failed" for t in d["tests"]), (res["id"], d)
        assert all(t["message"].startswith("checker: wrong answer") for t in d["tests"]), (res["id"], d)
        assert res["reward"] <= 0.2 + 1e-9, res


def test_planted_files_and_a_link_at_the_task_dir_reach_no_checker(url):
    """A candidate that writes answer/output/input files everywhere it can and puts a link at the
    task directory's name: the checker reads only what root wrote: every test fails."""
    for res in score(url, [{"completion": fence(PLANT), "task": secret_task()}]):
        assert res["status"] == "ok" and res["detail"]["passed"] == 0, res
        assert all("wrong answer" in t["message"] for t in res["detail"]["tests"]), res


FORGERIES = {
    "ok_text": "print('ok')",
    "testlib_ok": "print('ok 1 test case'); import sys; print('ok', file=sys.stderr)",
    "points_text": "import sys; print('points 1'); print('points 1.0', file=sys.stderr)",
    "exit_7": "import sys; print('points 1', file=sys.stderr); sys.exit(7)",
    "exit_0_after_ok": "import os; os.write(1, b'ok\\n'); os._exit(0)",
    "exit_3": "import sys; print('FAIL', file=sys.stderr); sys.exit(3)",
    "kill_self": "import os, signal; print('ok', flush=True); os.kill(os.getpid(), signal.SIGKILL)",
}


def test_forged_checker_words_and_exit_codes_earn_nothing(url):
    items = [{"id": k, "completion": fence(p), "task": secret_task()} for k, p in FORGERIES.items()]
    for res in score(url, items):
        assert res["status"] == "ok", res
        d = res["detail"]
        assert d["passed"] == 0 and res["reward"] <= 0.2 + 1e-9, (res["id"], d)
        assert not any(t.get("score") for t in d["tests"]), (res["id"], d)


# A checker with bugs an output can hit: a huge number crashes it, a negative one hangs it; on
# the reference it is right.
FRAGILE = r'''
#include <bits/stdc++.h>
int main(int c, char** v){ std::ifstream out(v[2]), an(v[3]); long long k; if(!(out>>k)) return 2;
  volatile long long x = 0;
  if(k < 0) { while(true) x++; }
  if(k > 1000) std::raise(SIGSEGV);
  long long a; an>>a; return k == a ? 0 : 1; }
'''
FRAGILE_CASES = [{"stdin": "", "stdout": "5\n"}]


def fragile_task() -> dict:
    return {"type": "code", "timeout_s": 2.0,
            "tests": {"kind": "stdio", "cases": FRAGILE_CASES, "checker": {"language": "cpp", "source": FRAGILE}}}


def test_outputs_that_crash_or_hang_the_checker_fail_flagged(url):
    """Once the checker accepted its reference, its crash (a signal) or its time limit on a
    candidate's output fails that test with the flag checker_failed, counted in /metrics; the
    item stays ok (never task_error, never infra_error); the right answer still passes."""
    before = httpx.get(url + "/metrics").text
    progs = {"right": "print(5)", "crash": "print(10**9)", "hang": "print(-1)", "wrong": "print(4)"}
    res = {r["id"]: r for r in score(url, [{"id": k, "completion": fence(p), "task": fragile_task()}
                                           for k, p in progs.items()])}
    assert res["right"]["reward"] == pytest.approx(1.0) and not res["right"]["detail"]["flags"], res["right"]
    assert res["wrong"]["detail"]["tests"][0]["message"].startswith("checker: wrong answer"), res["wrong"]
    for k in ("crash", "hang"):
        r = res[k]
        assert r["status"] == "ok", r
        assert r["detail"]["tests"][0]["status"] == "failed", r
        assert "checker failed on this output" in r["detail"]["tests"][0]["message"], r
        assert r["detail"]["flags"] == ["checker_failed"], r
    after = httpx.get(url + "/metrics").text
    assert _count(after, "output") >= _count(before, "output") + 2
    assert _count(after, "checker_failed", 'reward_server_hack_attempts_total{kind="') >= 2


def _count(text: str, label: str, prefix: str = 'reward_server_checker_failures_total{on="') -> float:
    for line in text.splitlines():
        if line.startswith(prefix + label + '"}'):
            return float(line.split()[-1])
    return 0.0


def test_a_flood_is_an_output_limit_and_a_big_output_is_still_checked(url):
    """Output past the job's cap is the candidate's output_limit (the checker never runs); a
    large output within it reaches the checker whole and is judged (a wrong one fails)."""
    task = secret_task()
    task["tests"] = dict(task["tests"], cases=SECRET_CASES[:1])
    progs = {"flood": "import sys\nwhile True: sys.stdout.write('9' * 65536)",
             "big_wrong": "import sys\nsys.stdout.write(('1 ' * 500000 + '\\n') * 8)",
             "big_right": f"import sys\nsys.stdout.write(' ' * 4000000 + '{SECRET}' + '\\n' * 1000000)"}
    res = {r["id"]: r for r in score(url, [{"id": k, "completion": fence(p), "task": task} for k, p in progs.items()])}
    assert res["flood"]["detail"]["tests"][0]["status"] == "output_limit", res["flood"]
    assert res["big_wrong"]["detail"]["tests"][0]["status"] == "failed", res["big_wrong"]
    assert res["big_right"]["detail"]["tests"][0]["status"] == "passed", res["big_right"]
