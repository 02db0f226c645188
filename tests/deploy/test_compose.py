"""compose.yaml end to end: the server and a scalable runner service, no Docker socket.

Brings the stack up with compose under a project name of its own on a free port, scores code
and math through HTTP, kills a runner container and checks that the server keeps answering
and takes the runner back when it is started again, scales the runners up and checks that the
pool grows, then brings everything down. Images are built (sandbox/build_images.sh, no
registry) when missing or older than the sources. Marked `docker`: in CI (CI=true) a missing
engine, image builder or compose fails these tests instead of skipping them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from sandbox.hosts.docker import RUNNER_CAPS, STARTUP_CAPS
from tests.conftest import IN_CI

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
SANDBOX_IMAGE = os.environ.get("SANDBOX_IMAGE", "verireward-sandbox:latest")
SERVER_IMAGE = os.environ.get("SERVER_IMAGE", "verireward-server:latest")

CODE_ITEM = {
    "id": "code",
    "completion": "Here you go:\n```python\ndef add(a, b):\n    return a + b\n```",
    "task": {"type": "code", "language": "python",
             "tests": {"kind": "assert", "asserts": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]}},
}
HALF_ITEM = {
    "id": "half",
    "completion": "```python\ndef add(a, b):\n    return a * b\n```",
    "task": {"type": "code", "language": "python",
             "tests": {"kind": "assert", "asserts": ["assert add(2, 2) == 4", "assert add(1, 2) == 3"]}},
}
MATH_ITEM = {"id": "math", "completion": "So the answer is \\boxed{\\frac{3}{4}}.", "task": {"type": "math", "answer": "0.75"}}


def compose_cmd() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return None


def _image_created(image: str) -> float | None:
    r = subprocess.run(["docker", "image", "inspect", "-f", "{{.Created}}", image], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    stamp = r.stdout.strip().rstrip("Z")  # 2026-12-01T04:20:10.123456789Z
    whole, _, frac = stamp.partition(".")
    return datetime.fromisoformat(whole).replace(tzinfo=timezone.utc).timestamp() + float("0." + (frac or "0"))


def _sources_mtime() -> float:
    paths = [ROOT / "pyproject.toml", ROOT / "reward_server" / "Dockerfile", ROOT / "sandbox" / "Dockerfile"]
    for d in ("reward_server", "sandbox"):
        paths += (ROOT / d).rglob("*.py")
    return max(p.stat().st_mtime for p in paths if p.exists())


def ensure_images() -> None:
    """Build both images (no registry) when one is missing or older than the sources."""
    newest = _sources_mtime()
    created = [_image_created(i) for i in (SANDBOX_IMAGE, SERVER_IMAGE)]
    if all(c is not None and c >= newest for c in created):
        return
    env = dict(os.environ, WITH_SERVER="1", PYTHON=sys.executable,
               SANDBOX_IMAGE=SANDBOX_IMAGE, SERVER_IMAGE=SERVER_IMAGE)
    r = subprocess.run(["bash", "sandbox/build_images.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, f"image build failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"


class Stack:
    def __init__(self, compose: list[str]) -> None:
        self.project = f"vrtest{uuid.uuid4().hex[:10]}"
        self.compose = compose
        self.env = dict(os.environ, REWARD_SERVER_BIND="127.0.0.1:", SANDBOX_IMAGE=SANDBOX_IMAGE,
                        SERVER_IMAGE=SERVER_IMAGE, COMPOSE_PROJECT_NAME=self.project)
        self.url = ""

    def run(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run([*self.compose, "-p", self.project, "-f", str(ROOT / "compose.yaml"), *args],
                           cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, f"compose {' '.join(args)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        return r

    def up(self, runners: int) -> None:
        self.run("up", "-d", "--no-build", "--scale", f"runner={runners}")

    def containers(self, service: str) -> list[str]:
        return sorted(self.run("ps", "-q", service).stdout.split())

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=10)

    def pool(self) -> dict:
        try:
            return self.get("/readyz").json().get("pool", {})
        except (httpx.HTTPError, ValueError):
            return {}

    def score(self, items: list[dict]) -> list[dict]:
        r = httpx.post(self.url + "/v1/score", json={"items": items}, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["results"]

    def wait(self, cond, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                logs = self.run("logs", "--tail", "30", check=False, timeout=60).stdout[-4000:]
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; pool={self.pool()}\n{logs}")
            time.sleep(0.5)


@pytest.fixture(scope="module")
def stack():
    compose = compose_cmd()
    if compose is None:
        msg = "neither docker-compose nor the `docker compose` plugin is installed"
        if IN_CI:
            pytest.fail(f"CI requires compose: {msg}", pytrace=False)
        pytest.skip(msg)
    ensure_images()
    s = Stack(compose)
    try:
        s.up(runners=2)
        port = s.run("port", "server", "8000").stdout.strip().rsplit(":", 1)[1]
        s.url = f"http://127.0.0.1:{port}"
        s.wait(lambda: s.pool().get("live") == 2, 90, "/readyz with 2 runners")
        yield s
    finally:
        s.run("down", "-v", "--remove-orphans", "-t", "5", check=False, timeout=120)


def test_hardening_as_deployed(stack):
    runner = json.loads(subprocess.run(["docker", "inspect", stack.containers("runner")[0]],
                                       capture_output=True, text=True, check=True).stdout)[0]
    hc = runner["HostConfig"]
    assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] is True and hc["IpcMode"] == "none"
    assert hc["CapDrop"] == ["ALL"] and set(hc["CapAdd"]) <= set(RUNNER_CAPS + STARTUP_CAPS)  # no more than the docker host
    assert any(o.startswith("no-new-privileges") for o in hc["SecurityOpt"])
    assert hc["PidsLimit"] and hc["Memory"] and hc["NanoCpus"]
    assert "/scratch" in hc["Tmpfs"] and "mode=755" in hc["Tmpfs"]["/scratch"]
    server = json.loads(subprocess.run(["docker", "inspect", stack.containers("server")[0]],
                                       capture_output=True, text=True, check=True).stdout)[0]
    mounts = {m["Destination"]: m for m in server["Mounts"]}
    assert "/var/run/docker.sock" not in mounts and all("docker.sock" not in m.get("Source", "") for m in mounts.values())
    assert mounts["/run/sandbox"]["RW"] is False
    assert server["HostConfig"]["CapDrop"] == ["ALL"] and server["HostConfig"]["ReadonlyRootfs"] is True


def test_scores_code_and_math(stack):
    assert stack.get("/healthz").status_code == 200
    res = {r["id"]: r for r in stack.score([CODE_ITEM, HALF_ITEM, MATH_ITEM])}
    assert res["code"]["status"] == "ok" and res["code"]["reward"] == pytest.approx(1.0)
    assert res["code"]["detail"]["passed"] == 2
    assert res["half"]["status"] == "ok" and res["half"]["detail"]["passed"] == 1
    assert res["half"]["reward"] == pytest.approx(0.1 + 0.1 + 0.8 * 0.5)
    assert res["math"]["status"] == "ok" and res["math"]["reward"] == 1.0


def test_killed_runner_server_recovers(stack):
    victim = stack.containers("runner")[0]
    before = stack.pool()
    subprocess.run(["docker", "kill", victim], check=True, capture_output=True)
    # jobs sent right away land partly on the dead runner: retried on the live one, none lost
    results = stack.score([dict(CODE_ITEM, id=f"k{i}") for i in range(12)] + [MATH_ITEM])
    assert all(r["status"] == "ok" and r["reward"] == pytest.approx(1.0) for r in results), results
    stack.wait(lambda: stack.pool().get("live") == 1, 30, "the dead runner to leave the pool")
    assert stack.get("/readyz").status_code == 200
    assert stack.pool()["infra_errors"] == before.get("infra_errors", 0)
    # started again (what the restart policy does after a crash or an OOM kill): it rejoins
    subprocess.run(["docker", "start", victim], check=True, capture_output=True)
    stack.wait(lambda: stack.pool().get("live") == 2, 60, "the restarted runner to rejoin")
    assert stack.pool()["restarts"] >= 1
    results = stack.score([dict(CODE_ITEM, id=f"r{i}") for i in range(8)])
    assert all(r["status"] == "ok" and r["reward"] == pytest.approx(1.0) for r in results), results


def test_scale_up_grows_the_pool(stack):
    stack.up(runners=3)
    assert len(stack.containers("runner")) == 3
    stack.wait(lambda: stack.pool().get("live") == 3, 60, "3 live runners")
    metrics = stack.get("/metrics").text
    gauges = {line.split("{")[0].split(" ")[0]: float(line.rsplit(" ", 1)[1])
              for line in metrics.splitlines() if line.startswith("reward_server_pool_")}
    assert gauges["reward_server_pool_live"] == 3 and gauges["reward_server_pool_capacity"] == 12, gauges
    results = stack.score([dict(CODE_ITEM, id=f"s{i}") for i in range(24)])
    assert all(r["status"] == "ok" and r["reward"] == pytest.approx(1.0) for r in results)
    assert len({r["detail"]["runner"] for r in results}) >= 2
