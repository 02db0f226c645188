"""Runner-side attacks of issue 15 (findings 9, 12, 13) through HTTP, as a client sends them:
`/run_code` on a live server on each host. Each must be refused by the sandbox and reported as
the program's own outcome, while the server keeps answering and no runner is lost. (The same
programs through the pool alone are in tests/sandbox/test_isolation.py and test_protocol.py.)"""

from __future__ import annotations

import ast

import httpx

from tests.sandbox.test_isolation import SYSCALLS

FLOOD = """
import os, struct
frame = struct.pack('>I', 1 << 20) + b'x' * (1 << 20)
for _ in range(40):
    for fd in range(3, 64):
        try:
            os.write(fd, frame)
        except OSError:
            pass
print('flooded')
"""

FILL = """
n = 0
try:
    while True:  # files of 8 MiB (one file is capped at 16 MiB by RLIMIT_FSIZE)
        with open(f'big{n}', 'wb') as f:
            for _ in range(8):
                f.write(b'x' * (1 << 20))
        n += 1
except OSError as e:
    print('full after', n, 'files:', e.strerror)
"""


def run_code(url: str, code: str, timeout: int = 10) -> dict:
    r = httpx.post(url + "/run_code", json={"code": code, "language": "python", "run_timeout": timeout}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_kernel_surface_frame_flood_and_full_scratch_through_run_code(url):
    probe = run_code(url, SYSCALLS)
    assert probe["status"] == "Success", probe
    res = ast.literal_eval(probe["run_result"]["stdout"].strip())
    assert "ALLOWED" not in res.values(), res  # no namespaces, mount, bpf, ptrace, raw sockets...
    assert res["bounding_set"] == "empty" and res["no_new_privs"] == "set", res
    for call in ("modify_ldt", "memfd_secret", "lsm_list_modules", "open_tree_attr", "file_getattr"):
        assert res[call] == "EPERM", (call, res)  # Docker allows the first two on amd64; we refuse all
    flood = run_code(url, FLOOD)  # 40 MiB of frames at every descriptor: nobody listens to them
    assert flood["status"] == "Success" and flood["run_result"]["stdout"] == "flooded\n", flood
    full = run_code(url, FILL)
    assert full["status"] == "Success" and "No space left on device" in full["run_result"]["stdout"], full
    after = run_code(url, "print(sum(range(10)))")  # the same server, runners intact
    assert after["status"] == "Success" and after["run_result"]["stdout"] == "45\n", after
    assert httpx.get(url + "/readyz", timeout=10).status_code == 200
