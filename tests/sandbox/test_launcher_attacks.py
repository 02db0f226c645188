"""Attacks on the launcher that starts a compiled program once per stdio test (launcher.Launcher),
through a real pool on each host: a program that kills, stops or signals its launcher, leaves
a process behind for the next test, or reaches for the launcher's memory fails its own test
only; the other tests of the job get honest verdicts and the runners serve the next job."""

from __future__ import annotations

import pytest_asyncio

from sandbox import Job, Limits, make_pool
from tests.conftest import kind_params
from tests.sandbox.conftest import no_runner_lost
from tests.sandbox.lang_programs import host_options

HEAD = "#include <bits/stdc++.h>\n#include <signal.h>\n#include <unistd.h>\n#include <fcntl.h>\n#include <dirent.h>\n"


@pytest_asyncio.fixture(scope="module", params=kind_params())
async def pool(request):
    p = make_pool(request.param, size=1, per_runner=1, **host_options(request.param))
    await p.start()
    yield p
    await p.close()


def job(program: str, cases: list[tuple[str, str]], timeout_s: float = 2.0) -> Job:
    return Job(program=HEAD + program, language="cpp",
               tests={"kind": "stdio", "cases": [{"stdin": i, "stdout": o} for i, o in cases]},
               limits=Limits(timeout_s=timeout_s, memory_mb=256))


ECHO = [("1\n", "1\n"), ("2\n", "2\n"), ("3\n", "3\n")]


async def run(pool, j: Job):
    async with no_runner_lost(pool):
        return await pool.run(j)


async def test_killing_the_launcher_fails_only_that_test(pool):
    # it prints the right answer and exits 0 after killing its parent: no status came, so no pass
    prog = "int main(){ int x; std::cin >> x; if (x == 1) kill(getppid(), SIGKILL); std::cout << x << '\\n'; }\n"
    r = await run(pool, job(prog, ECHO))
    assert [t.status for t in r.tests] == ["error", "passed", "passed"], r.tests


async def test_kill_everything_it_may(pool):
    prog = "int main(){ int x; std::cin >> x; if (x == 2) kill(-1, SIGKILL); std::cout << x << '\\n'; }\n"
    r = await run(pool, job(prog, ECHO))
    assert r.tests[0].status == "passed" and r.tests[2].status == "passed", r.tests
    assert r.tests[1].status != "passed", r.tests


async def test_stopping_the_launcher_costs_its_own_test(pool):
    prog = "int main(){ int x; std::cin >> x; if (x == 1) kill(getppid(), SIGSTOP); std::cout << x << '\\n'; }\n"
    j = job(prog, ECHO, timeout_s=0.5)
    j.limits.stop_on_timeout = False
    r = await run(pool, j)
    assert [t.status for t in r.tests[1:]] == ["passed", "passed"], r.tests
    assert r.tests[0].status != "passed", r.tests


async def test_a_process_left_behind_does_not_reach_the_next_test(pool):
    # test 1 leaves a detached child that would write a file after 0.3 s; test 2 looks for it after 1 s
    prog = """int main(){ int x; std::cin >> x;
  if (x == 1) { if (fork() == 0) { setsid(); close(0); close(1); close(2); usleep(300000);
      int fd = open("planted", O_CREAT | O_WRONLY, 0644); if (fd >= 0) write(fd, "x", 1); _exit(0); } }
  if (x == 2) { usleep(1000000); std::cout << (access("planted", F_OK) == 0 ? "planted" : "clean") << '\\n'; return 0; }
  std::cout << x << '\\n'; }
"""
    r = await run(pool, job(prog, [("1\n", "1\n"), ("2\n", "clean\n")]))
    assert [t.status for t in r.tests] == ["passed", "passed"], r.tests


async def test_the_launchers_memory_is_out_of_reach(pool):
    # its parent (the launcher, same uid) is not dumpable and ptrace is filtered: no write into it
    prog = """int main(){ char p[64]; snprintf(p, sizeof p, "/proc/%d/mem", (int)getppid());
  int fd = open(p, O_RDWR); long r = syscall(101 /* ptrace */, 16 /* ATTACH */, getppid(), 0, 0);
  std::cout << (fd < 0 && r != 0 ? "denied" : "reached") << '\\n'; }
"""
    r = await run(pool, job(prog, [("", "denied\n")] * 2))
    assert [t.status for t in r.tests] == ["passed", "passed"], r.tests


async def test_a_program_holds_only_its_three_pipes(pool):
    prog = """int main(){ DIR* d = opendir("/proc/self/fd"); int me = dirfd(d); std::vector<int> v; dirent* e;
  while ((e = readdir(d))) { if (e->d_name[0] != '.' && atoi(e->d_name) != me) v.push_back(atoi(e->d_name)); }
  std::sort(v.begin(), v.end()); for (int f : v) std::cout << f << ' '; std::cout << '\\n'; }
"""
    r = await run(pool, job(prog, [("", "0 1 2 \n")] * 3))
    assert [t.status for t in r.tests] == ["passed"] * 3, r.tests


async def test_verdicts_of_one_job_over_many_launched_tests(pool):
    # crash, timeout, wrong and right answers interleaved: each test's own status
    prog = """int main(){ int x; std::cin >> x; if (x == 3) abort(); if (x == 5) for (;;) {}
  std::cout << (x == 4 ? 0 : x) << '\\n'; }
"""
    cases = [(f"{i}\n", f"{i}\n") for i in range(1, 8)]
    j = job(prog, cases, timeout_s=0.5)
    j.limits.stop_on_timeout = False
    r = await run(pool, j)
    assert [t.status for t in r.tests] == ["passed", "passed", "error", "failed", "timeout", "passed", "passed"], r.tests


async def test_a_launched_program_gets_sigxcpu_before_sigkill(pool):
    # RLIMIT_CPU: soft = the timeout rounded up + 1 s, hard one more: past the soft limit it is
    # SIGXCPU (a time-limit verdict) even where the supervisor was too starved to stop it first
    prog = "#include <sys/resource.h>\nint main(){ rlimit r; getrlimit(RLIMIT_CPU, &r); std::cout << r.rlim_cur << ' ' << r.rlim_max << '\\n'; }\n"
    r = await run(pool, job(prog, [("", "2 3\n")] * 2, timeout_s=1.0))
    assert [t.status for t in r.tests] == ["passed", "passed"], r.tests


async def test_a_program_may_open_its_stdio_by_name(pool):
    # honest: plain `./prog < in` can open /dev/stdin and /proc/self/fd/1 (its pipes are its own)
    prog = ('int main(){ std::ifstream in("/dev/stdin"); int x; in >> x; std::ofstream out("/proc/self/fd/1");'
            ' out << x << "\\n"; }\n')
    r = await run(pool, job(prog, ECHO))
    assert [t.status for t in r.tests] == ["passed"] * 3, r.tests
